// Package keyfile holds what the commands say about a key ring file:
// how to create a missing one, and a warning when others may read it.
package keyfile
