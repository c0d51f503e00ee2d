package gosdk_test

import (
	"reflect"
	"testing"

	"github.com/mrtr-go/mrtr/gosdk"
	"github.com/mrtr-go/mrtr/internal/testing/apidoc"
)

// TestFlowDocumentsItsMethods: `go doc gosdk Flow` shows State, Resumed,
// Round, ID and Asked, which it does only when they are declared on Flow
// itself, and Flow exports no field of an internal package's type.
func TestFlowDocumentsItsMethods(t *testing.T) {
	apidoc.FlowMethods(t, "github.com/mrtr-go/mrtr/gosdk", reflect.TypeFor[gosdk.Flow[struct{}]](), "State", "Resumed", "Round", "ID", "Asked")
}
