package reqstate

import "strings"

// TokenKeyID returns the key id a token names in its clear-text prefix
// ("v1." kid "."), or "" when token does not start with a well-formed
// prefix. It neither authenticates the token nor allocates: use it on a
// token this process sealed, or one Open accepted, never to trust a
// client's claim (a forger writes any id there).
func TokenKeyID(token string) string {
	rest, ok := strings.CutPrefix(token, versionPrefix)
	if !ok {
		return ""
	}
	dot := strings.IndexByte(rest, '.')
	if dot <= 0 || dot > MaxKeyIDLen {
		return ""
	}
	for i := range dot {
		if !keyIDChar(rest[i]) {
			return ""
		}
	}
	return rest[:dot]
}
