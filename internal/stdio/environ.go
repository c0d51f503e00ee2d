package stdio

import (
	"fmt"
	"strings"
)

// ReservedPrefix starts the names of the proxy's own environment variables.
// Environ drops every one of them from the parent environment.
const ReservedPrefix = "MRTR_"

// KeyRingVar holds the proxy's key ring. It never reaches a child, not even
// when given explicitly.
const KeyRingVar = "MRTR_KEYS"

// Environ returns the environment of a child: parent (os.Environ(), say)
// without any variable whose name starts with ReservedPrefix, followed by
// extra. It is a pure function: neither slice is modified.
//
// Each extra entry must be NAME=VALUE with a non-empty NAME; NAME cannot
// contain '=' (the first one ends it) or a NUL byte, nor VALUE a NUL byte.
// An extra entry replaces a parent variable of the same name, and a later
// extra entry an earlier one. Names are compared exactly, as Unix does.
//
// An extra entry may name a variable starting with ReservedPrefix: the
// operator asked for it explicitly (the parent's value is still dropped
// unless given again). The one exception is KeyRingVar, which is refused.
//
// Errors name the offending entry by its position and, when it has one, its
// name, never its value.
func Environ(parent, extra []string) ([]string, error) {
	override := make(map[string]int, len(extra)) // name -> index of its last extra entry
	for i, kv := range extra {
		name, value, ok := strings.Cut(kv, "=")
		switch {
		case !ok:
			return nil, fmt.Errorf("stdio: environment entry %d is not NAME=VALUE", i+1)
		case name == "":
			return nil, fmt.Errorf("stdio: environment entry %d has an empty name", i+1)
		case strings.IndexByte(name, 0) >= 0:
			return nil, fmt.Errorf("stdio: environment entry %d: its name contains a NUL byte", i+1)
		case strings.IndexByte(value, 0) >= 0:
			return nil, fmt.Errorf("stdio: environment entry %d (%s): its value contains a NUL byte", i+1, name)
		case name == KeyRingVar:
			return nil, fmt.Errorf("stdio: environment entry %d: %s is the proxy's key ring and never reaches the upstream", i+1, name)
		}
		override[name] = i
	}
	env := make([]string, 0, len(parent)+len(extra))
	for _, kv := range parent {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, ReservedPrefix) {
			continue
		}
		if _, ok := override[name]; ok {
			continue
		}
		env = append(env, kv)
	}
	for i, kv := range extra {
		name, _, _ := strings.Cut(kv, "=")
		if override[name] == i {
			env = append(env, kv)
		}
	}
	return env, nil
}
