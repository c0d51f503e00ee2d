package clientcmd

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestEndpointURLLoopbackWithoutScheme: a loopback host:port/path without
// a scheme is taken as http:// (cmd/mrtr's TestCallURLWithoutScheme runs
// mrtr call with one, and with what is refused).
func TestEndpointURLLoopbackWithoutScheme(t *testing.T) {
	if got, err := EndpointURL("localhost:8080/mcp"); err != nil || got != "http://localhost:8080/mcp" {
		t.Errorf("localhost:8080/mcp: %q, %v", got, err)
	}
}

func TestToolArguments(t *testing.T) {
	args, typed, err := ToolArguments(`{"a":1,"b":"x"}`, []string{"b=2", "c=abc", "d=null", `e="q"`, "f=[1", "g=", "h=a=b", "b=3", "a=x"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"a": "x", "b": json.Number("3"), "c": "abc", "d": nil, "e": "q", "f": "[1", "g": "", "h": "a=b"}
	if !reflect.DeepEqual(args, want) {
		t.Fatalf("args %#v\nwant %#v", args, want)
	}
	if wantTyped := map[string]string{"b": "3", "d": "null"}; !reflect.DeepEqual(typed, wantTyped) {
		t.Fatalf("typed %v, want %v", typed, wantTyped)
	}
}
