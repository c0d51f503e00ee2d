package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// Schema is the value of every line's schema member.
const Schema = "mrtr.audit/v1"

// The events of a trail, one line each.
const (
	EventPaused    = "paused"    // a pause was sealed
	EventResumed   = "resumed"   // a resume was accepted
	EventCompleted = "completed" // a call that did not pause answered
	EventRejected  = "rejected"  // a resume was refused; or a tasks/* request, or answers of one (tasks.go)

	EventTaskCreated   = "task_created"   // a tool call became a task
	EventTaskInput     = "task_input"     // a task asked for input
	EventTaskUpdated   = "task_updated"   // a tasks/update's answers were taken
	EventTaskCompleted = "task_completed" // a task's work ended: complete, tool_error or error
	EventTaskCancelled = "task_cancelled" // a tasks/cancel cancelled a task
)

// MaxLineBytes bounds one line, for the reader (Verify, and the tail a
// Writer reads on open). A Writer's lines stay far below it: every string
// taken from a request is cut to 256 bytes, and a pause's inputs are the
// server's own.
const MaxLineBytes = 1 << 20

// Line is one line of a trail, decoded (ParseLine). Its members are
// written in this order; those marked omitempty are left out when
// empty, the others are always written.
type Line struct {
	Schema     string    `json:"schema"`
	Time       time.Time `json:"time"`  // UTC
	Event      string    `json:"event"` // EventPaused, ...
	Flow       string    `json:"flow,omitempty"`
	Task       string    `json:"task,omitempty"` // a task's id under a MAC (tasks.go), never the id
	Round      int       `json:"round"`
	Method     string    `json:"method"`
	Target     string    `json:"target"`
	Principal  Principal `json:"principal"`
	Client     *Client   `json:"client,omitempty"`
	ArgsDigest string    `json:"args_digest,omitempty"`
	Inputs     []Input   `json:"inputs,omitempty"`  // on paused
	Answers    []Answer  `json:"answers,omitempty"` // on resumed
	Outcome    string    `json:"outcome,omitempty"` // on completed: complete, tool_error, error
	ErrorCode  int       `json:"error_code,omitempty"`
	Reason     string    `json:"reason,omitempty"` // on rejected
	Upstream   string    `json:"upstream,omitempty"`
	Node       string    `json:"node,omitempty"`
	Forwarder  string    `json:"forwarded_by,omitempty"` // the replica that forwarded this resume here (WithForwardedBy)
	RequestID  string    `json:"request_id,omitempty"`
	TraceID    string    `json:"trace_id,omitempty"`
	// Checkpoint is the checkpoint of a checkpoint or restart line
	// (EventCheckpoint, EventRestart), which carries only schema, time,
	// event, node and the chain besides.
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
	// Certs are the certifications of a certs line (EventCerts): the
	// opening of a trail begun with an evolved key, when they are too
	// many for its first checkpoint.
	Certs    []Cert     `json:"certs,omitempty"`
	Prev     string     `json:"prev"`
	KeyID    string     `json:"kid"`
	MAC      string     `json:"mac"`
	taskID   string     // the task id to digest into Task, under the line's key
	raw      []byte     // the line as read, without its newline
	macStart int        // where ,"mac": begins in raw
	evo      *evolution // a checkpoint's prepared epoch change, committed when it is signed
}

// Principal is who called: the issuer and subject of the verified
// credential, or Anonymous.
type Principal struct {
	Issuer    string `json:"iss,omitempty"`
	Subject   string `json:"sub,omitempty"`
	Anonymous bool   `json:"anonymous,omitempty"`
}

// Client is what the client says it is (its clientInfo): never verified.
type Client struct {
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
}

// Input is one input request of a pause.
type Input struct {
	Key    string `json:"key"`
	Method string `json:"method,omitempty"`
}

// Answer is one answer of a resume.
type Answer struct {
	Key    string `json:"key"`
	Action string `json:"action"`
}

// ErrMalformed is the error of ParseLine for bytes that are not a line
// of this schema.
var ErrMalformed = errors.New("audit: not an audit line")

// macSuffixLen is the length of `,"mac":"` + 43 base64url bytes + `"}`.
const macSuffixLen = len(`,"mac":"`) + 43 + len(`"}`)

// ParseLine decodes one line (without its newline). It checks the form
// only, not the MAC or the link (Verify does): a JSON object whose last
// member is "mac" with 43 base64url characters, with schema Schema and
// a kid. Every error is ErrMalformed, and never quotes the line.
func ParseLine(b []byte) (*Line, error) {
	if len(b) < macSuffixLen+2 || len(b) > MaxLineBytes {
		return nil, ErrMalformed
	}
	start := len(b) - macSuffixLen
	suffix := b[start:]
	if !bytes.HasPrefix(suffix, []byte(`,"mac":"`)) || !bytes.HasSuffix(suffix, []byte(`"}`)) {
		return nil, ErrMalformed
	}
	for _, c := range suffix[len(`,"mac":"`) : len(suffix)-2] {
		if !isBase64URL(c) {
			return nil, ErrMalformed
		}
	}
	l := new(Line)
	if err := json.Unmarshal(b, l); err != nil {
		return nil, ErrMalformed
	}
	if l.Schema != Schema || l.KeyID == "" || l.Event == "" || (l.Checkpoint != nil) != isCheckpoint(l.Event) ||
		(len(l.Certs) > 0) != (l.Event == EventCerts) {
		return nil, ErrMalformed
	}
	l.raw, l.macStart = b, start
	return l, nil
}

func isBase64URL(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

// appendBody encodes everything of l before prev, in the order of Line's
// members.
func appendBody(dst []byte, l *Line) []byte {
	dst = append(dst, `{"schema":`...)
	dst = appendString(dst, l.Schema)
	dst = append(dst, `,"time":"`...)
	dst = l.Time.UTC().AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, `","event":`...)
	dst = appendString(dst, l.Event)
	if isSealing(l.Event) {
		dst = appendMember(dst, "node", l.Node)
		if l.Checkpoint != nil {
			dst = append(dst, `,"checkpoint":`...)
			dst = appendCheckpoint(dst, l.Checkpoint)
		}
		if len(l.Certs) > 0 {
			dst = appendCerts(append(dst, `,"certs":`...), l.Certs)
		}
		return dst
	}
	if l.Flow != "" {
		dst = append(dst, `,"flow":`...)
		dst = appendString(dst, l.Flow)
	}
	dst = appendMember(dst, "task", l.Task)
	dst = append(dst, `,"round":`...)
	dst = strconv.AppendInt(dst, int64(l.Round), 10)
	dst = append(dst, `,"method":`...)
	dst = appendString(dst, l.Method)
	dst = append(dst, `,"target":`...)
	dst = appendString(dst, l.Target)
	dst = append(dst, `,"principal":`...)
	if l.Principal.Anonymous {
		dst = append(dst, `{"anonymous":true}`...)
	} else {
		dst = append(dst, `{"iss":`...)
		dst = appendString(dst, l.Principal.Issuer)
		dst = append(dst, `,"sub":`...)
		dst = appendString(dst, l.Principal.Subject)
		dst = append(dst, '}')
	}
	if c := l.Client; c != nil {
		dst = append(dst, `,"client":{"name":`...)
		dst = appendString(dst, c.Name)
		dst = append(dst, `,"version":`...)
		dst = appendString(dst, c.Version)
		dst = append(dst, '}')
	}
	if l.ArgsDigest != "" {
		dst = append(dst, `,"args_digest":`...)
		dst = appendString(dst, l.ArgsDigest)
	}
	if len(l.Inputs) > 0 {
		dst = append(dst, `,"inputs":[`...)
		for i, in := range l.Inputs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"key":`...)
			dst = appendString(dst, in.Key)
			if in.Method != "" {
				dst = append(dst, `,"method":`...)
				dst = appendString(dst, in.Method)
			}
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	if len(l.Answers) > 0 {
		dst = append(dst, `,"answers":[`...)
		for i, a := range l.Answers {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"key":`...)
			dst = appendString(dst, a.Key)
			dst = append(dst, `,"action":`...)
			dst = appendString(dst, a.Action)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	dst = appendMember(dst, "outcome", l.Outcome)
	if l.ErrorCode != 0 {
		dst = append(dst, `,"error_code":`...)
		dst = strconv.AppendInt(dst, int64(l.ErrorCode), 10)
	}
	dst = appendMember(dst, "reason", l.Reason)
	dst = appendMember(dst, "upstream", l.Upstream)
	dst = appendMember(dst, "node", l.Node)
	dst = appendMember(dst, "forwarded_by", l.Forwarder)
	dst = appendMember(dst, "request_id", l.RequestID)
	return appendMember(dst, "trace_id", l.TraceID)
}

// isCheckpoint reports whether event is one of a checkpoint line.
func isCheckpoint(event string) bool { return event == EventCheckpoint || event == EventRestart }

// isSealing reports whether event is one of the lines the Writer adds
// with a Signer: checkpoints, restarts and certs.
func isSealing(event string) bool { return isCheckpoint(event) || event == EventCerts }

func appendMember(dst []byte, name, v string) []byte {
	if v == "" {
		return dst
	}
	dst = append(append(append(dst, ',', '"'), name...), '"', ':')
	return appendString(dst, v)
}

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD
// (the strings are already cut to valid UTF-8 where they come from a
// request).
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < 0x80 {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c < 0x20 || c == 0x7f:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == '\u2028' || r == '\u2029' {
			dst = fmt.Appendf(dst, `\u%04x`, r)
		} else {
			dst = append(dst, string(r)...)
		}
		i += n
	}
	return append(dst, '"')
}
