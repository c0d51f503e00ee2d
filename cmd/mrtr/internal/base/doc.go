// Package base is what every mrtr command is built on, as
// cmd/go/internal/base is for the go command: the Command type main lists
// and dispatches (Dispatch), the process's I/O (App), flag sets whose
// flags also read an MRTR_* variable and print --help and the README's
// flag tables (Flags), what an error means as an exit status (App.Exit),
// the version the commands report, and the upstream command after --
// that proxy, runner and probe run (CommandName, CheckCommand).
package base
