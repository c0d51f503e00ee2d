package proxy

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestTraceMeta(t *testing.T) {
	for _, tc := range []struct {
		meta string
		want map[string]any
	}{
		{``, nil},
		{`{}`, nil},
		{`not json`, nil},
		{`{"traceparent":5}`, nil},
		{`{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","other":{"x":1}}`,
			map[string]any{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}},
		{`{"traceparent":"tp","tracestate":"a=b"}`, map[string]any{"traceparent": "tp", "tracestate": "a=b"}},
	} {
		if got := traceMeta(json.RawMessage(tc.meta)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.meta, got, tc.want)
		}
	}
}
