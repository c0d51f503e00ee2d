// Package keyfile is how the commands write a key ring file, and what they
// say about one: how to create a missing one, and a warning when others
// may read it.
package keyfile
