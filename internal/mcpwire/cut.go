package mcpwire

// CutMember removes, in place, the member named key of obj whose value is
// written exactly as value, and returns obj without it; ok is false, and
// obj is returned as given, when the first member named key has another
// value or there is none. obj is one valid JSON object with no
// surrounding space whose member names are unique, as Go's encoding of a
// struct writes them: CutMember reads only up to the member it cuts and
// moves what follows it down, so a member placed early (go-sdk writes a
// result's content after its _meta) costs a short scan and one copy, with
// no allocation.
func CutMember(obj []byte, key, value string) (_ []byte, ok bool) {
	if len(obj) == 0 || obj[0] != '{' {
		return obj, false
	}
	prev := 0 // where the member before ends ('{' for the first)
	i := 1
	for {
		i = skipSpace(obj, i)
		if i >= len(obj) || obj[i] == '}' {
			return obj, false
		}
		nStart := i
		kEnd := skipString(obj, i)
		match := unquoteEqual(obj[nStart:kEnd], key)
		i = skipSpace(obj, kEnd) + 1 // ':'
		i = skipSpace(obj, i)
		vEnd := skipValue(obj, i)
		if match {
			if string(obj[i:vEnd]) != value {
				return obj, false
			}
			next := skipSpace(obj, vEnd)
			if obj[next] == ',' {
				// Cut from this member's name to the next one's.
				return append(obj[:nStart], obj[skipSpace(obj, next+1):]...), true
			}
			// The last member: cut from the end of the one before (its
			// comma with it), or from the brace when it is the only one.
			return append(obj[:prev+1], obj[next:]...), true
		}
		prev = vEnd - 1
		i = skipSpace(obj, vEnd)
		if i < len(obj) && obj[i] == ',' {
			i++
		}
	}
}
