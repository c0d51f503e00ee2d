package reqstate

import "encoding/binary"

// Principal identifies the caller a state is bound to. The zero value is
// the anonymous caller, which is distinct from every identified principal
// (including one with an empty issuer).
type Principal struct {
	// Issuer is the canonical issuer of the caller's credential (for a JWT,
	// its iss claim). It may be empty for a single-issuer deployment.
	Issuer string
	// Subject is the caller's identity at that issuer (for a JWT, its sub).
	Subject string
}

// Anonymous reports whether p is the anonymous caller.
func (p Principal) Anonymous() bool { return p.Issuer == "" && p.Subject == "" }

// Binding is what a state is bound to: the call it was issued for. It is
// authenticated (as the AEAD's associated data) but never stored in the
// token: Open recomputes it from the request being resumed, so a token
// moved to another method, protocol version, target, server or caller
// fails to open.
type Binding struct {
	// Method is the JSON-RPC method: tools/call, prompts/get or resources/read.
	Method string
	// ProtocolVersion is the MCP protocol version of the request.
	ProtocolVersion string
	// Target is the tool name, prompt name or resource URI.
	Target string
	// ServerID names the server (or cluster) that issued the state.
	ServerID string
	// Principal is the authenticated caller.
	Principal Principal
}

// aadLabel separates this use of the key from any other.
const aadLabel = "mrtr-reqstate"

// appendAAD appends the associated data for a token of the given version
// and key id under binding b. Every variable-length field is preceded by
// its length as a uvarint, and the principal by a tag byte (0 anonymous,
// 1 identified), so distinct inputs never encode to the same bytes.
func appendAAD(dst []byte, version byte, kid string, b *Binding) []byte {
	dst = append(dst, aadLabel...)
	dst = append(dst, version)
	dst = appendField(dst, kid)
	dst = appendField(dst, b.Method)
	dst = appendField(dst, b.ProtocolVersion)
	dst = appendField(dst, b.Target)
	dst = appendField(dst, b.ServerID)
	if b.Principal.Anonymous() {
		return append(dst, 0)
	}
	dst = append(dst, 1)
	dst = appendField(dst, b.Principal.Issuer)
	return appendField(dst, b.Principal.Subject)
}

func appendField(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// aadLen is an upper bound of appendAAD's output length.
func aadLen(kid string, b *Binding) int {
	const perField = binary.MaxVarintLen64
	return len(aadLabel) + 1 + 1 + 7*perField + len(kid) + len(b.Method) + len(b.ProtocolVersion) +
		len(b.Target) + len(b.ServerID) + len(b.Principal.Issuer) + len(b.Principal.Subject)
}
