package engine

import (
	"testing"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// BenchmarkNativeInput is what checking a native call's input costs: the
// tool's DecodeValue (validate against the derived schema, then decode
// strictly) beside the baseline it replaced, validating the same input
// against the same schema compiled as an action's input schema.
func BenchmarkNativeInput(b *testing.B) {
	input := map[string]any{"expression": "order.price * 2.0", "variables": map[string]any{"order": map[string]any{"price": 20.5}}}
	b.Run("DecodeValue", func(b *testing.B) {
		for b.Loop() {
			if _, err := celTool.DecodeValue(input); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("compiled-action-schema", func(b *testing.B) {
		compiled, err := action.Compile(action.Definition{Name: action.NativeCEL, Kind: action.KindTool,
			Tool: &action.ToolBlock{InputSchema: mcpkit.SchemaMap(celTool.InputSchema())}})
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if err := compiled.ValidateInput(input); err != nil {
				b.Fatal(err)
			}
		}
	})
}
