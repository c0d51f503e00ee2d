package stdio

import (
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
)

// A child that logs with a structured logger (Go's log/slog, pino, many
// others) writes one record a line on stderr, as logfmt
// (time=... level=WARN msg="...") or as a JSON object. Logged as it is,
// such a line becomes the message of the proxy's own record, wrapped a
// second time (msg="time=... level=WARN msg=\"...\""), and every level
// reads INFO. childRecord reads the record instead, so the proxy logs it
// at the child's level (at most WARN), its message and level as
// attributes under a message of the proxy's (ChildRecordMsg).

// maxChildAttrs bounds the attributes of a child's record carried over;
// the rest are dropped (the line is the child's, a flood of keys is not
// the proxy's to keep).
const maxChildAttrs = 16

// childRecord reads line as a structured log record: a JSON object, or
// logfmt key=value pairs, with a level and a message (msg or message).
// It returns the record's level, its message and its other attributes
// (time dropped: the proxy's record has its own), every string sanitised;
// ok is false for any other line, which is then logged as it is.
func childRecord(line string) (level slog.Level, msg string, attrs []slog.Attr, ok bool) {
	fields, ok := jsonFields(line)
	if !ok {
		if fields, ok = logfmtFields(line); !ok {
			return 0, "", nil, false
		}
	}
	var lvl, m string
	var haveLevel, haveMsg bool
	for _, f := range fields {
		switch strings.ToLower(f.key) {
		case "level", "lvl", "severity":
			if !haveLevel {
				lvl, haveLevel = f.val, true
			}
		case "msg", "message":
			if !haveMsg {
				m, haveMsg = f.val, true
			}
		}
	}
	if !haveLevel || !haveMsg {
		return 0, "", nil, false
	}
	if level, ok = parseChildLevel(lvl); !ok {
		return 0, "", nil, false
	}
	for _, f := range fields {
		switch strings.ToLower(f.key) {
		case "level", "lvl", "severity", "msg", "message", "time", "ts", "timestamp":
			continue
		}
		if len(attrs) == maxChildAttrs {
			break
		}
		attrs = append(attrs, slog.String(sanitise(f.key), sanitise(f.val)))
	}
	return level, sanitise(m), attrs, true
}

// parseChildLevel reads the level names of common loggers (DEBUG, info,
// Warning, ERR, fatal, slog's INFO+2) and pino's numbers (10 trace to 60
// fatal).
func parseChildLevel(s string) (slog.Level, bool) {
	switch strings.ToLower(s) {
	case "trace", "debug", "dbg", "10", "20":
		return slog.LevelDebug, true
	case "info", "information", "notice", "30":
		return slog.LevelInfo, true
	case "warn", "warning", "40":
		return slog.LevelWarn, true
	case "error", "err", "fatal", "panic", "critical", "crit", "alert", "emergency", "50", "60":
		return slog.LevelError, true
	}
	var l slog.Level // INFO+2, WARN-4: log/slog's own offsets
	if err := l.UnmarshalText([]byte(s)); err == nil {
		return l, true
	}
	return 0, false
}

// field is one key and value of a child's record, the value as text.
type field struct{ key, val string }

// jsonFields reads line as one JSON object of scalar members (objects
// and arrays are kept as their JSON text).
func jsonFields(line string) ([]field, bool) {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "{") {
		return nil, false
	}
	d := json.NewDecoder(strings.NewReader(line))
	d.UseNumber()
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	var fields []field
	for d.More() {
		t, err := d.Token()
		key, isKey := t.(string)
		if err != nil || !isKey {
			return nil, false
		}
		var raw json.RawMessage
		if err := d.Decode(&raw); err != nil {
			return nil, false
		}
		var s string
		if json.Unmarshal(raw, &s) != nil {
			s = string(raw) // a number, a boolean, null, an object, an array
		}
		fields = append(fields, field{key, s})
	}
	if t, err := d.Token(); err != nil || t != json.Delim('}') {
		return nil, false
	}
	if strings.TrimSpace(line[d.InputOffset():]) != "" {
		return nil, false // more after the object
	}
	return fields, true
}

// logfmtFields reads line as logfmt: key=value pairs separated by
// spaces, a value bare or double-quoted with Go's escapes (as log/slog's
// text handler writes it). Any other word makes it no logfmt line.
func logfmtFields(line string) ([]field, bool) {
	var fields []field
	s := strings.TrimSpace(line)
	for s != "" {
		eq := strings.IndexByte(s, '=')
		if eq <= 0 || strings.ContainsAny(s[:eq], " \t\"") {
			return nil, false
		}
		key := s[:eq]
		s = s[eq+1:]
		var val string
		if strings.HasPrefix(s, `"`) {
			end := quotedEnd(s)
			if end < 0 {
				return nil, false
			}
			v, err := strconv.Unquote(s[:end])
			if err != nil {
				return nil, false
			}
			val, s = v, s[end:]
			if s != "" && s[0] != ' ' && s[0] != '\t' {
				return nil, false
			}
		} else {
			end := strings.IndexAny(s, " \t")
			if end < 0 {
				end = len(s)
			}
			val, s = s[:end], s[end:]
		}
		fields = append(fields, field{key, val})
		s = strings.TrimLeft(s, " \t")
	}
	return fields, len(fields) > 0
}

// quotedEnd is the index just past the closing quote of the
// double-quoted string s starts with, or -1.
func quotedEnd(s string) int {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// unstructuredLevel is the level of a stderr line that is no record
// (childRecord): WARN for a line npm marks as an error or a warning
// ("npm ERR!" before npm 9, "npm error" and "npm warn" since, after
// leading blanks; never above WARN, as a child's own level), INFO
// otherwise.
func unstructuredLevel(line string) slog.Level {
	s := strings.TrimLeft(line, " \t")
	for _, p := range [...]string{"npm ERR!", "npm error", "npm WARN", "npm warn"} {
		if strings.HasPrefix(s, p) {
			return slog.LevelWarn
		}
	}
	return slog.LevelInfo
}
