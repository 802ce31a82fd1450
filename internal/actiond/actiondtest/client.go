package actiondtest

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callLimit bounds one request a test makes through the go-sdk client.
const callLimit = 2 * time.Minute

// ListTools lists a server's tools through the go-sdk client; an error
// fails the test.
func ListTools(t testing.TB, s *mcp.ClientSession) *mcp.ListToolsResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callLimit)
	defer cancel()
	res, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	return res
}

// CallTool calls a tool through the go-sdk client; a JSON-RPC error fails
// the test.
func CallTool(t testing.TB, s *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callLimit)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	return res
}

// Text is a tool result's text content, its parts a line each.
func Text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// JSONEqual compares two JSON-shaped values by their encodings.
func JSONEqual(a, b any) bool {
	var x, y any
	ab, _ := json.Marshal(a)
	bb, _ := json.Marshal(b)
	json.Unmarshal(ab, &x)
	json.Unmarshal(bb, &y)
	return reflect.DeepEqual(x, y)
}

// AsJSON encodes a value for a failure message.
func AsJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Strings is the strings of a decoded JSON array; what is not a string is
// left out.
func Strings(v any) []string {
	var out []string
	list, _ := v.([]any)
	for _, item := range list {
		if s, ok := item.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
