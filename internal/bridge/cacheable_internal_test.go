package bridge

import (
	"strings"
	"testing"
)

// TestCacheableResults (issue 35, item 16): the complete results of the
// list methods and of resources/read carry ttlMs and cacheScope, as
// 2026-07-28 has them; those of other methods do not.
func TestCacheableResults(t *testing.T) {
	for method, want := range map[string]bool{
		"tools/list": true, "prompts/list": true, "resources/list": true, "resources/templates/list": true, "resources/read": true,
		"tools/call": false, "prompts/get": false, "completion/complete": false,
	} {
		got := string(modernResult(method, []byte(`{"x":1}`)))
		if has := strings.Contains(got, `"ttlMs":0`) && strings.Contains(got, `"cacheScope":"private"`); has != want {
			t.Errorf("%s: %s; want ttlMs and cacheScope: %v", method, got, want)
		}
	}
}
