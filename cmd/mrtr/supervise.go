package main

// superviseArg is the hidden first argument that makes mrtr the supervisor
// of a stdio upstream command (see supervise), dispatched by main before
// any flag parsing. It is not a command a user runs: without the
// variable stdio.SupervisorParentVar, and unless it leads its own process
// group, it refuses to run.
const superviseArg = "__supervise"
