package mcpwire_test

import (
	"encoding/json"
	"fmt"

	"github.com/mrtr-go/mrtr/internal/mcpwire"
)

func Example() {
	meta := json.RawMessage(`{"io.modelcontextprotocol/clientCapabilities":{"sampling":{}}}`)
	caps := mcpwire.CapsFromMeta(meta)
	reqs := map[string]json.RawMessage{
		"confirm": json.RawMessage(`{"method":"elicitation/create","params":{"message":"Deploy?","requestedSchema":{"type":"object"}}}`),
		"draft":   json.RawMessage(`{"method":"sampling/createMessage","params":{"messages":[],"maxTokens":50}}`),
	}
	missing := mcpwire.Missing(caps, reqs)
	fmt.Println(missing)
	fmt.Println(string(mcpwire.MissingCapabilityData(missing...)))
	// Output:
	// [elicitation.form]
	// {"requiredCapabilities":{"elicitation":{"form":{}}}}
}
