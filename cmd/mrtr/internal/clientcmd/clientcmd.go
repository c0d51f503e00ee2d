package clientcmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"

	"github.com/mrtr-go/mrtr/internal/termtext"
)

// CleanError returns err with its text cleaned of terminal controls
// (termtext.Clean), still matching what err matches; nil for nil.
func CleanError(err error) error {
	if err == nil {
		return nil
	}
	return &cleanedError{err}
}

type cleanedError struct{ err error }

func (e *cleanedError) Error() string { return termtext.Clean(e.err.Error()) }

func (e *cleanedError) Unwrap() error { return e.err }

// EndpointURL is the URL mrtr call and mrtr probe talk to: raw if it is
// an http:// or https:// URL; raw taken as http:// when it has no scheme
// and names a loopback host (127.0.0.1:8080/mcp); else an error that
// offers the corrected URL when there is one.
func EndpointURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
		return raw, nil
	}
	if !strings.Contains(raw, "://") {
		if g, err := url.Parse("http://" + raw); err == nil && g.Host != "" {
			if LoopbackHost(g.Hostname()) {
				return g.String(), nil
			}
			return "", fmt.Errorf("URL must be an http:// or https:// URL: did you mean https://%s?", termtext.Line(raw))
		}
	}
	return "", errors.New("URL must be an http:// or https:// URL, like http://127.0.0.1:8080/mcp")
}

// ToolArguments merges --args-json and the --arg entries. An --arg value
// is JSON if it parses as JSON, else a string; typed keeps the original
// text of the values that parsed as something else than a string, so
// that a string-typed parameter can take it back ("123" stays "123").
func ToolArguments(argsJSON string, kvs []string) (args map[string]any, typed map[string]string, err error) {
	args, typed = map[string]any{}, map[string]string{}
	if argsJSON != "" {
		v, ok := parseJSON(argsJSON)
		obj, isObj := v.(map[string]any)
		if !ok || !isObj {
			return nil, nil, errors.New("--args-json: want a JSON object")
		}
		args = obj
	}
	for _, kv := range kvs {
		k, s, _ := strings.Cut(kv, "=")
		delete(typed, k)
		v, ok := parseJSON(s)
		if !ok {
			v = s
		}
		args[k] = v
		if _, isString := v.(string); !isString {
			typed[k] = s
		}
	}
	return args, typed, nil
}

// parseJSON decodes one JSON value, keeping numbers exact.
func parseJSON(s string) (any, bool) {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, false
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, false
	}
	return v, true
}

func LoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
