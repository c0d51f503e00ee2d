// Package demo builds the server that `mrtr serve` runs: every fixture the
// official MCP conformance suite calls, plus three demo tools, with every
// multi-round handler sealed by an mrtr guard through package gosdk. It is
// internal: its tool set follows the conformance suite, not a stable API.
//
// # Demo tools
//
//   - deploy {service, env: staging|production}: asks "confirm"
//     (elicitation form {approve: boolean}); on approval returns
//     "deployed <service> to <env>" from the sealed continuation; a "no",
//     a decline or a cancel is an isError result.
//   - transfer {from, to, amount}: quotes a fee of 0.5% of the amount,
//     rounded half up to the cent and at least 0.01 (Fee), seals the
//     quote, asks "confirm"; on approval returns "transferred ..." with the
//     sealed amount and fee. Amounts are > 0, at most MaxAmount, with at
//     most two decimals.
//   - guess_number {max: 1..MaxGuessRange, default 100}: picks a secret in
//     [1, max] with crypto/rand, kept only in the sealed (encrypted) state,
//     and asks "guess" (form {guess: integer}) with "higher"/"lower" hints
//     until the guess is right, then returns "correct: <n>". A max that a
//     binary search could not finish within the guard's round cap is
//     refused.
//
// # Conformance fixtures
//
// Tools answering in one round: test_simple_text, test_image_content,
// test_audio_content, test_embedded_resource, test_multiple_content_types,
// test_error_handling, test_tool_with_logging, test_tool_with_progress,
// json_schema_2020_12_tool, test_reconnection (its answer survives the
// stream close only if the HTTP handler keeps an event store),
// test_x_mcp_header (SEP-2243 Mcp-Param header), test_logging_tool,
// test_trigger_tool_change and test_trigger_prompt_change.
//
// Tools that ask the client, all through the adapter (input_required with
// a sealed requestState on 2026-07-28; go-sdk's bridge turns the pause
// into a real server-to-client request on 2025-11-25 sessions):
// test_sampling, test_elicitation, test_elicitation_sep1034_defaults,
// test_elicitation_sep1330_enums, test_missing_capability (needs sampling:
// -32021 without it), test_streaming_elicitation, and the SEP-2322
// fixtures test_input_required_result_elicitation (key user_name; also
// completes from an answer sent without any requestState, and asks again
// for a missing, wrong or malformed one), _sampling (capital_question),
// _list_roots (client_roots), _request_state and _tampered_state (confirm,
// with a sealed continuation; a tampered state is rejected by the guard
// with -32602), _multiple_inputs (user_name, greeting, client_roots),
// _multi_round (step1, then step2 under a new state) and _capabilities
// (asks only what this request's declared capabilities allow).
//
// Prompts: test_simple_prompt, test_prompt_with_arguments (with
// completion/complete for arg1 and arg2), test_prompt_with_embedded_resource,
// test_prompt_with_image and test_input_required_result_prompt (key
// user_context).
//
// Resources: test://static-text, test://static-binary,
// test://watched-resource (resources/subscribe and unsubscribe on
// 2025-11-25) and the template test://template/{id}/data. Unknown URIs
// get go-sdk's -32602 "Resource not found" with data.uri.
package demo
