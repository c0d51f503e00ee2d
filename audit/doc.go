// Package audit writes and verifies an audit trail of MRTR flows: who was
// asked, who answered what, and what then ran, in a log nobody can
// quietly edit.
//
// # What a trail records
//
// A Writer is an mrtr.Auditor: set it as mrtr.Options.Auditor and the
// guard has it write one JSON object per line (JSON Lines) for every
// pause sealed (paused: the round, the input requests' keys and
// methods), every resume accepted (resumed: the answers' keys and
// actions, accept, decline or cancel), every resume refused (rejected:
// the guard's reason) and every call that answered without pausing
// (completed: complete, tool_error, or error with its JSON-RPC code).
// A Writer is a task.Observer too (task.Options.Observer): it writes the
// facts of tasks (task_created, task_input, task_updated, task_completed,
// task_cancelled, and rejected for a refused tasks/* request or ignored
// answers), naming a task by a MAC of its id, never the id (tasks.go).
// Each line says who (principal, from the verified credential, and
// client, as the client reports itself), what (method, target,
// args_digest, round, flow), where (node, upstream, request_id, trace_id)
// and when (time, RFC 3339 in UTC). Line lists the members.
//
// # What a trail never records
//
// No token, no state, no argument value and no answer's content. The
// arguments appear only as args_digest: "hmac-sha256:" and the base64url
// HMAC-SHA256, under a key derived from the ring, of the SHA-256 of
// their RFC 8785 form (the hash the guard binds into every token), so
// that equal arguments have equal digests on every node and every round
// sealed under the same ring key, while a value cannot be confirmed by
// guessing without the key. Answers appear as their key and action only.
// Every string taken from a request (target, subject, client name, ...)
// is cut to 256 bytes of valid UTF-8.
//
// # Tamper evidence
//
// Each line carries prev, the base64url SHA-256 of the line before it
// ("" on the first line of a chain), then kid and mac: the base64url
// HMAC-SHA256 of every byte of the line before its ,"mac": member, under
// a key derived (HKDF-SHA256, a fixed label) from the ring key kid names,
// the one that seals tokens when the line is written. Altering a line
// breaks its MAC; deleting or inserting one breaks the next line's link;
// cutting the tail leaves a line without its newline. Verify finds the
// first of these, and checks every line after a torn one. Whoever holds the ring can write a trail that verifies;
// whoever does not, cannot change one without Verify noticing, except by
// cutting whole lines off its end (compare Result.Lines, or the last
// line's time, with what you expect).
//
// A Writer opened on a file (OpenFile) goes on with the chain of the
// file's last line, so a restart continues the chain; Reopen, for
// logrotate, goes on with the chain it holds, in a new file or in the
// same one (so lines cut from it before a SIGHUP show as a broken link).
// A file that ends in a torn line (a crash mid-write) is never glued
// onto: the next line ends it with a newline and links to its bytes, and
// Verify names the torn line and checks the lines after it.
//
// # Sealing: checkpoints a public key checks
//
// The MACs need the ring to check, and whoever holds the ring can forge
// tokens and trails alike. With Options.Signer the Writer also writes
// checkpoint lines, signed with Ed25519 over domain-separated bytes
// (Checkpoint): the node, a sequence (1, 2, ...), the count of lines
// before it since the trail began, the chain head (the link it carries),
// its time, the Hash of the checkpoint before, the epoch of its key,
// and at an epoch's end the next epoch's public key (Next), or final at
// Close. One is written at start, every CheckpointInterval while lines
// wait to be sealed (default 10 s), at each epoch's end, at Reopen and
// at Close; each goes to OnCheckpoint, to be logged off the host.
// VerifySealed checks a trail with the public key alone.
//
// The key is a node key file (GenerateKeyFile, LoadSigner; FILE.pub is
// what the auditor holds) or, without one, derived from a ring key
// (RingSigner). A key file in a writable directory evolves every Epoch
// (default 15 min): next seed = SHA-256(label || seed), the next public
// key certified by the current key in the epoch's last checkpoint, the
// file replaced atomically and the old seed zeroed, so a node taken in
// epoch k holds no key that signs for an earlier epoch. KeyMode says
// which mode a Signer is in and what it gives up; SECURITY.md has the
// threat table.
//
// With a Signer, OpenFile and a Reopen onto another non-empty file go on
// from the file's last checkpoint, not its last line (which whoever
// can write the file chose): the lines after it are abandoned by a
// signed restart record (EventRestart) naming their count and hash,
// and lines cut before it break its count or link. Reopen of the same
// file keeps the chain held in memory, as without a Signer. A trail
// begun with an evolved key opens with the certifications from
// FILE.pub's key to it (in its first checkpoint, or in certs lines,
// EventCerts, when they are many), and no line in it may be dated
// before that epoch began.
//
// VerifySealed reads several files as one chain, oldest first; a
// rotated file whose predecessors are gone verifies with the log's
// checkpoints before it (SealOptions.Continued). Checkpoints a log
// carried off the host (ReadCheckpoints) must be the trail's: one the
// trail lacks, or a different one for the same sequence, means lines
// were cut or rewritten.
//
// # Cost
//
// A line is encoded, linked and MACed under the Writer's lock, on the
// goroutine of the call it describes, and the call waits until it is
// written: lines queued while a write is in flight go out together in the
// next one (group commit), so a call waits for at most the write in
// flight and its own, never for a flush; nothing is fsynced. A process
// that dies loses nothing a call was told is written; a machine that dies
// may lose what the kernel had not written back, which Verify reports.
//
// OpenTelemetry log records are not emitted: the trail's value is its
// chain, which a log pipeline does not keep, and the OTel spans the
// command already exports carry the same calls.
package audit
