// Package node is what a running mrtr node has, mrtr serve and mrtr
// proxy alike: the flags they share (CommonConfig), the key ring and its reload,
// the single-use store and the watch of a Redis one, the guard, the HTTP
// listener with its limits and Host check, bearer authentication, the
// drain, health, readiness, metrics and traces, and the audit writer.
package node
