package mcpwire

import "encoding/json"

// AnswerAction returns the action of an answer to an input request, read
// from its JSON without its content: an elicitation result's action
// (accept, decline or cancel; any other value is "other", so the client's
// bytes are not repeated), and "accept" for an answer without one (a
// sampling or roots result: the client answered).
func AnswerAction(raw json.RawMessage) string {
	a, present := Member(TrimSpace(raw), "action")
	if !present {
		return "accept"
	}
	switch s, _ := StringValue(a); s {
	case "accept", "decline", "cancel":
		return s
	}
	return "other"
}
