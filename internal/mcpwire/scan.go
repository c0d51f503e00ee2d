package mcpwire

// This file is the message splitter's validating pass: one scan over a
// message both checks it is JSON, as encoding/json.Valid does, and cuts
// its top-level object into members, instead of json.Valid's scan and a
// second one to split.

// maxDepth is encoding/json's nesting limit: a document nested deeper is
// not valid for it, so not for the splitter either.
const maxDepth = 10000

// scanObject validates b, which starts with '{' and has no surrounding
// space, as one JSON value, and splits it into members; dup reports a
// repeated member name. ok is false for anything json.Valid refuses.
func scanObject(b []byte) (o Object, dup, ok bool) {
	o = make(Object, 8)
	i := skipSpace(b, 1)
	if i < len(b) && b[i] == '}' {
		return o, false, i+1 == len(b)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return nil, false, false
		}
		kEnd, ok := scanString(b, i)
		if !ok {
			return nil, false, false
		}
		key := unquote(b[i:kEnd])
		i = skipSpace(b, kEnd)
		if i >= len(b) || b[i] != ':' {
			return nil, false, false
		}
		i = skipSpace(b, i+1)
		vEnd, ok := scanValue(b, i, 1)
		if !ok {
			return nil, false, false
		}
		if _, seen := o[key]; seen {
			dup = true
		}
		o[key] = b[i:vEnd:vEnd]
		i = skipSpace(b, vEnd)
		if i >= len(b) {
			return nil, false, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return o, dup, i+1 == len(b)
		default:
			return nil, false, false
		}
	}
}

// scanValue returns the index after the JSON value at b[i], nested depth
// deep, and whether it is valid.
func scanValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; {
	case c == '"':
		return scanString(b, i)
	case c == '{' || c == '[':
		if depth >= maxDepth {
			return i, false
		}
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == end {
			return i + 1, true
		}
		for {
			if c == '{' {
				if i >= len(b) || b[i] != '"' {
					return i, false
				}
				k, ok := scanString(b, i)
				if !ok {
					return i, false
				}
				i = skipSpace(b, k)
				if i >= len(b) || b[i] != ':' {
					return i, false
				}
				i = skipSpace(b, i+1)
			}
			v, ok := scanValue(b, i, depth+1)
			if !ok {
				return i, false
			}
			i = skipSpace(b, v)
			if i >= len(b) {
				return i, false
			}
			if b[i] == end {
				return i + 1, true
			}
			if b[i] != ',' {
				return i, false
			}
			i = skipSpace(b, i+1)
		}
	case c == 't':
		return literal(b, i, "true")
	case c == 'f':
		return literal(b, i, "false")
	case c == 'n':
		return literal(b, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return scanNumber(b, i)
	}
	return i, false
}

func literal(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}

// scanString returns the index after the string at b[i] == '"' and
// whether it is valid: no control character, only JSON's escapes. Like
// encoding/json, it does not judge UTF-8.
func scanString(b []byte, i int) (int, bool) {
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return i, false
		case c == '\\':
			i++
			if i >= len(b) {
				return i, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(b)-i < 5 {
					return i, false
				}
				for _, h := range b[i+1 : i+5] {
					if !isHex(h) {
						return i, false
					}
				}
				i += 4
			default:
				return i, false
			}
		}
	}
	return i, false
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// scanNumber returns the index after the number at b[i] and whether it
// follows JSON's grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return i, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return i, false
		}
		i = j
	}
	return i, true
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}
