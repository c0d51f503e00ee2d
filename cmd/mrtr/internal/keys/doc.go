// Package keys is mrtr keygen and mrtr keys: writing a key ring, checking
// it, each key's status, and the rotation steps.
package keys
