package bench

import (
	"context"
	"testing"
)

// TestFlowMCPGo proves every endpoint of BenchmarkFlowMCPGo measures a
// working 2-round flow: the text is right and the handler ran twice per
// flow, so the client really resumed.
func TestFlowMCPGo(t *testing.T) {
	for _, ep := range MCPGoFlowEndpoints {
		t.Run(ep.Name, func(t *testing.T) {
			fs := NewMCPGoFlowServer()
			defer fs.Close()
			c, err := fs.Connect(context.Background(), ep.Path)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for range 3 {
				if got, err := MCPGoFlowCall(context.Background(), c); err != nil || got != FlowWant {
					t.Fatalf("%q, %v", got, err)
				}
			}
			if n := fs.Runs(); n != 6 {
				t.Fatalf("handler ran %d times for 3 flows, want 6", n)
			}
		})
	}
}
