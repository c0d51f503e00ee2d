package probe

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ModernVersion is the protocol revision whose requests can pause.
const ModernVersion = "2026-07-28"

// LegacyVersion is the revision before it: tools ask with server-to-client
// requests inside a session, and there is no requestState.
const LegacyVersion = "2025-11-25"

// Kind is the shape of a server's answer.
type Kind string

// The kinds of Outcome.
const (
	KindError     Kind = "error"          // a JSON-RPC error
	KindHTTP      Kind = "http_error"     // an HTTP error status without a JSON-RPC response
	KindPause     Kind = "input_required" // an input_required result
	KindComplete  Kind = "complete"       // a result that is not an error
	KindToolError Kind = "tool_error"     // a result with isError
	KindNone      Kind = "no_answer"      // nothing: connection error, timeout, crash
)

// Outcome is one answer, reduced to what the checks compare.
type Outcome struct {
	Kind   Kind
	Status int // HTTP status, 0 when none
	// IDOK reports whether the response carried the request's id.
	IDOK bool
	// ID is the response's id as sent (JSON), for the error_shape detail.
	ID string
	// Code, Message and Reason describe a JSON-RPC error (Reason is
	// data.reason when it is a string).
	Code    int
	Message string
	Reason  string
	// Text is the first text content of a result.
	Text string
	// State and Requests are those of an input_required result.
	State    string
	HasState bool
	Requests map[string]json.RawMessage
	// Err is why there was no answer.
	Err error
}

// Keys returns the sorted keys of an input_required result's requests.
func (o *Outcome) Keys() []string {
	ks := make([]string, 0, len(o.Requests))
	for k := range o.Requests {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// String is a short description for a report.
func (o *Outcome) String() string {
	switch o.Kind {
	case KindError:
		s := fmt.Sprintf("error %d %s", o.Code, quote(o.Message, 48))
		if o.Reason != "" {
			s += " (" + o.Reason + ")"
		}
		return s
	case KindHTTP:
		return "HTTP " + strconv.Itoa(o.Status)
	case KindPause:
		return "input_required [" + strings.Join(o.Keys(), " ") + "]"
	case KindComplete:
		return "complete " + quote(o.Text, 48)
	case KindToolError:
		return "isError " + quote(o.Text, 48)
	default:
		if o.Err != nil {
			return "no answer (" + o.Err.Error() + ")"
		}
		return "no answer"
	}
}

// quote returns s quoted, cut to at most n runes.
func quote(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf8.RuneCountInString(s) > n {
		s = string([]rune(s)[:n]) + "…"
	}
	return strconv.Quote(s)
}

// outcomeOf reduces a reply to the request with id.
func outcomeOf(rep *Reply, err error, id int64) Outcome {
	if err != nil {
		return Outcome{Kind: KindNone, Err: err}
	}
	o := Outcome{Status: rep.Status}
	what := "a reply"
	if rep.Status != 0 {
		what = "HTTP " + strconv.Itoa(rep.Status)
	}
	if rep.Message == nil {
		if rep.Status >= 400 {
			o.Kind = KindHTTP
		} else {
			o.Kind = KindNone
			o.Err = fmt.Errorf("%s without a JSON-RPC response", what)
		}
		return o
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Result *struct {
			ResultType     string                     `json:"resultType"`
			IsError        bool                       `json:"isError"`
			RequestState   json.RawMessage            `json:"requestState"`
			InputRequests  map[string]json.RawMessage `json:"inputRequests"`
			Content        json.RawMessage            `json:"content"`
			Messages       json.RawMessage            `json:"messages"`
			Contents       json.RawMessage            `json:"contents"`
			StructuredText json.RawMessage            `json:"structuredContent"`
		} `json:"result"`
		Error *struct {
			Code    int             `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		} `json:"error"`
	}
	if json.Unmarshal(rep.Message, &m) != nil {
		o.Kind = KindNone
		o.Err = fmt.Errorf("%s with an unreadable JSON-RPC response", what)
		return o
	}
	o.ID = string(m.ID)
	o.IDOK = o.ID == strconv.FormatInt(id, 10)
	switch {
	case m.Error != nil:
		o.Kind = KindError
		o.Code, o.Message = m.Error.Code, m.Error.Message
		var d struct {
			Reason string `json:"reason"`
		}
		if json.Unmarshal(m.Error.Data, &d) == nil {
			o.Reason = d.Reason
		}
	case m.Result != nil:
		r := m.Result
		o.Text = firstText(r.Content)
		if o.Text == "" {
			o.Text = firstText(r.Messages)
		}
		if o.Text == "" && len(r.Contents) > 0 {
			o.Text = string(r.Contents)
		}
		switch {
		case r.ResultType == "input_required":
			o.Kind = KindPause
			o.Requests = r.InputRequests
			if o.Requests == nil {
				o.Requests = map[string]json.RawMessage{}
			}
			var st string
			if len(r.RequestState) > 0 && string(r.RequestState) != "null" && json.Unmarshal(r.RequestState, &st) == nil {
				o.State, o.HasState = st, true
			}
		case r.IsError:
			o.Kind = KindToolError
		default:
			o.Kind = KindComplete
		}
	default:
		o.Kind = KindNone
		o.Err = fmt.Errorf("%s with neither result nor error", what)
	}
	return o
}

// firstText returns the text of the first text content in a content (or
// messages) list.
func firstText(raw json.RawMessage) string {
	var items []struct {
		Type    string          `json:"type"`
		Text    string          `json:"text"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &items) != nil {
		return ""
	}
	for _, it := range items {
		if it.Type == "text" {
			return it.Text
		}
		if it.Content != nil {
			var c struct{ Type, Text string }
			if json.Unmarshal(it.Content, &c) == nil && c.Type == "text" {
				return c.Text
			}
		}
	}
	return ""
}

// Judgement is the verdict on one altered retry.
type Judgement int

const (
	// Refused: the server said no.
	Refused Judgement = iota
	// Accepted: the server went on with the altered state.
	Accepted
	// Inconclusive: the answer looks like the honest retry's refusal-like
	// answer, or there was none, so nothing tells acceptance and refusal
	// apart.
	Inconclusive
)

func (j Judgement) String() string {
	switch j {
	case Refused:
		return "refused"
	case Accepted:
		return "accepted"
	default:
		return "inconclusive"
	}
}

// Judge decides whether got, the answer to an altered retry, is a
// refusal, given honest, the answer to the honest retry of the same tool
// with the same answers, and first, the sorted input request keys of that
// tool's first round. The rules are in the package documentation.
func Judge(got, honest Outcome, first []string) Judgement {
	switch got.Kind {
	case KindError:
		if honest.Kind == KindError && honest.Code == got.Code && honest.Message == got.Message {
			return Inconclusive
		}
		return Refused
	case KindHTTP:
		if honest.Kind == KindHTTP && honest.Status == got.Status {
			return Inconclusive
		}
		return Refused
	case KindNone:
		// No answer (a timeout, a reset, a crash, the budget spent) is no
		// refusal either: nothing says what the server did with the state.
		return Inconclusive
	case KindToolError:
		if honest.Kind == KindToolError && honest.Text == got.Text {
			return Accepted
		}
		return Refused
	case KindPause:
		if slices.Equal(got.Keys(), first) {
			if honest.Kind == KindPause && slices.Equal(honest.Keys(), first) {
				return Inconclusive
			}
			return Refused
		}
		return Accepted
	default:
		return Accepted
	}
}
