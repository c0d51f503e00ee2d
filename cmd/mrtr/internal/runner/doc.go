// Package runner is mrtr runner: it runs the upstream command for
// mrtr proxy --runner under a uid of its own (internal/runner, imported as
// mrtrrunner here, does the work).
package runner
