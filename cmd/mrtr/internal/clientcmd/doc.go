// Package clientcmd is what the client commands, mrtr call and mrtr
// probe, share: the endpoint URL they are given, the arguments of
// --arg and --args-json, and errors cleaned of terminal controls.
package clientcmd
