// Package probe is mrtr probe: the command line and the report of the
// checks internal/probe (imported as mrtrprobe here) runs against a
// server's requestState handling.
package probe
