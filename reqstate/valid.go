package reqstate

import "encoding/binary"

// maxValidDepth is encoding/json's nesting limit (its maxNestingDepth):
// json.Valid rejects more than this many open arrays and objects.
const maxValidDepth = 10000

// validJSON reports whether data is one JSON value, accepting exactly what
// json.Valid accepts (TestValidJSONMatchesStdlib and FuzzValidJSON hold it
// to that): RFC 8259 syntax with optional surrounding white space, at most
// maxValidDepth levels of nesting, and, like json.Valid, any byte from
// 0x20 up inside strings (it does not check UTF-8).
//
// Why not json.Valid: it steps a state machine through a function pointer
// per byte, which made it the largest single cost of Seal for a typical
// continuation of a few hundred bytes (about 780 ns of a 1.7 µs Seal for
// the 300-byte continuation of the bench module; this takes about 200 ns,
// see BenchmarkValidJSON). This is one loop over the bytes, an explicit
// stack of bits (object or array) instead of recursion, and no allocation.
func validJSON(data []byte) bool {
	var objects [maxValidDepth/64 + 1]uint64 // bit d: level d+1 is an object
	depth := 0
	i := 0
value:
	for {
		i = skipJSONSpace(data, i)
		if i >= len(data) {
			return false
		}
		switch c := data[i]; {
		case c == '{' || c == '[':
			if depth == maxValidDepth {
				return false
			}
			if c == '{' {
				objects[depth/64] |= 1 << (depth % 64)
			} else {
				objects[depth/64] &^= 1 << (depth % 64)
			}
			depth++
			i = skipJSONSpace(data, i+1)
			if i < len(data) && data[i] == c+2 { // '{'+2 is '}', '['+2 is ']'
				i++
				depth--
				break // an empty container is a complete value
			}
			if c == '{' {
				if i = jsonMemberName(data, i); i < 0 {
					return false
				}
			}
			continue value
		case c == '"':
			if i = jsonString(data, i+1); i < 0 {
				return false
			}
		case c == 't':
			if i = jsonLiteral(data, i, "true"); i < 0 {
				return false
			}
		case c == 'f':
			if i = jsonLiteral(data, i, "false"); i < 0 {
				return false
			}
		case c == 'n':
			if i = jsonLiteral(data, i, "null"); i < 0 {
				return false
			}
		case c == '-' || '0' <= c && c <= '9':
			if i = jsonNumber(data, i); i < 0 {
				return false
			}
		default:
			return false
		}
		// A value ended at i: close the containers it completes, then
		// move on to the next element or member.
		for {
			i = skipJSONSpace(data, i)
			if depth == 0 {
				return i == len(data)
			}
			if i >= len(data) {
				return false
			}
			inObject := objects[(depth-1)/64]>>((depth-1)%64)&1 == 1
			switch c := data[i]; {
			case c == ',':
				i++
				if inObject {
					if i = jsonMemberName(data, skipJSONSpace(data, i)); i < 0 {
						return false
					}
				}
				continue value
			case inObject && c == '}' || !inObject && c == ']':
				i++
				depth--
			default:
				return false
			}
		}
	}
}

func skipJSONSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// jsonMemberName checks a member name and its colon at data[i:] and
// returns the index after the colon, or -1.
func jsonMemberName(data []byte, i int) int {
	if i >= len(data) || data[i] != '"' {
		return -1
	}
	if i = jsonString(data, i+1); i < 0 {
		return -1
	}
	i = skipJSONSpace(data, i)
	if i >= len(data) || data[i] != ':' {
		return -1
	}
	return i + 1
}

// jsonString checks the rest of a string whose opening quote is just
// before data[i] and returns the index after its closing quote, or -1.
func jsonString(data []byte, i int) int {
	for {
		// Skip plain bytes (none below 0x20, no quote, no backslash), eight
		// at a time with the usual SWAR "has a zero byte" test while that
		// many are left, then one at a time up to the next special byte.
		for i+8 <= len(data) {
			const ones, highs = 0x0101010101010101, 0x8080808080808080
			x := binary.LittleEndian.Uint64(data[i:])
			q, bs := x^(ones*'"'), x^(ones*'\\') // a zero byte where x has " or \
			if ((x-ones*0x20)&^x|(q-ones)&^q|(bs-ones)&^bs)&highs != 0 {
				break
			}
			i += 8
		}
		for i < len(data) && data[i] >= 0x20 && data[i] != '"' && data[i] != '\\' {
			i++
		}
		if i >= len(data) {
			return -1
		}
		switch data[i] {
		case '"':
			return i + 1
		case '\\':
		default: // below 0x20
			return -1
		}
		// An escape.
		if i+1 >= len(data) {
			return -1
		}
		switch data[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i += 2
		case 'u':
			if i+6 > len(data) {
				return -1
			}
			for _, h := range data[i+2 : i+6] {
				if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
					return -1
				}
			}
			i += 6
		default:
			return -1
		}
	}
}

// jsonLiteral checks that data[i:] starts with lit and returns the index
// after it, or -1.
func jsonLiteral(data []byte, i int, lit string) int {
	if len(data)-i < len(lit) || string(data[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// jsonNumber checks the number starting at data[i] (a '-' or a digit) and
// returns the index after it, or -1. What follows it is the caller's to
// judge, so "01" fails there, as in encoding/json.
func jsonNumber(data []byte, i int) int {
	if data[i] == '-' {
		i++
	}
	switch {
	case i >= len(data):
		return -1
	case data[i] == '0':
		i++
	case '1' <= data[i] && data[i] <= '9':
		i = jsonDigits(data, i+1)
	default:
		return -1
	}
	if i < len(data) && data[i] == '.' {
		j := jsonDigits(data, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		j := jsonDigits(data, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func jsonDigits(data []byte, i int) int {
	for i < len(data) && '0' <= data[i] && data[i] <= '9' {
		i++
	}
	return i
}
