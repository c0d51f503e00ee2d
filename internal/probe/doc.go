// Package probe checks, from the outside, how an MCP server handles the
// requestState of 2026-07-28 Multi Round-Trip Requests: whether a client
// can read it, and whether the server refuses it tampered, moved to
// another tool or method, with other arguments, replayed, from another
// caller, after its lifetime, oversized or of the wrong JSON type, and in
// what shape it says no. `mrtr probe` prints its Report; the project's own
// end-to-end tests run the same checks against mrtr and the servers it
// fronts.
//
// # What counts as a refusal
//
// Every check alters the state of a fresh pause and sends the retry with
// the same answers as an honest retry of the same tool, whose outcome is
// the baseline. The outcome of the altered retry is judged against it
// (Judge):
//
//   - a JSON-RPC error, or an HTTP error status: refused (inconclusive
//     when the honest retry fails the same way);
//   - a result with isError: refused, unless the honest retry ends with
//     the same isError text (then that is the decline path running on a
//     state the server accepted);
//   - an input_required result asking the same input requests as the
//     first round: the server started over, refused (inconclusive when the
//     honest retry starts over too: the answers give the server no reason
//     to move on, so nothing tells the two apart; answers that accept,
//     from Options.Answers, make the check conclusive);
//   - no answer (a timeout, a reset connection, a crash): inconclusive,
//     not a refusal (the shape checks oversized and not_a_string fail
//     it);
//   - anything else (a complete result, an input_required of a later
//     round): accepted.
//
// # A run that checked less than it seems
//
// A tool is taken only once it paused twice the same way (a server may
// ask something once, outside the tool's flow). A run in which tampered,
// moved or arguments_changed was skipped or inconclusive for a reason
// other than a flag not given lists them in Report.Incomplete; a run that
// could check nothing (a 2025-11-25 server, no pausable tool) says why
// once, in Report.Unchecked.
//
// # Safety
//
// Every call is a real tool call. By default every input request is
// answered with a refusal (elicitation: decline; sampling: a fixed text;
// roots: an empty list), so a server that accepts a forged state runs its
// decline path, which shows the acceptance without the side effect.
// Each check pauses the server once and then ends that flow with an
// honest resume that declines (see Run), so a server that holds
// something per paused call holds nothing once the check is done.
// Options bound the number of requests and space them out.
package probe
