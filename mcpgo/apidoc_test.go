package mcpgo_test

import (
	"reflect"
	"testing"

	"github.com/mrtr-go/mrtr/internal/testing/apidoc"
	"github.com/mrtr-go/mrtr/mcpgo"
)

// TestFlowDocumentsItsMethods: `go doc mcpgo Flow` shows State, Resumed,
// Round, ID and Asked, which it does only when they are declared on Flow
// itself, and Flow exports no field of an internal package's type.
func TestFlowDocumentsItsMethods(t *testing.T) {
	apidoc.FlowMethods(t, "github.com/mrtr-go/mrtr/mcpgo", reflect.TypeFor[mcpgo.Flow[struct{}]](), "State", "Resumed", "Round", "ID", "Asked")
}
