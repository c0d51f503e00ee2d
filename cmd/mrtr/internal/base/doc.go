// Package base is what every mrtr command is built on, as
// cmd/go/internal/base is for the go command: the Command type main lists
// and dispatches, the process's I/O (App), flag sets whose flags also read
// an MRTR_* variable and print --help and the README's flag tables
// (Flags), and what an error means as an exit status (App.Exit).
package base
