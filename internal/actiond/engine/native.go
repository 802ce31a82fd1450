package engine

import (
	"context"
	"reflect"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/incusspawn/isx/internal/mcpkit"
)

// Native tools are the platform's own, listed by reference without a
// registry action. Each is defined from Go types with mcpkit.NewTool in the
// file of its family, beside the code that runs it: graphql.go, cel.go, and
// get_task and cancel_task in tasks.go. The natives a later issue runs go
// the same way, each into a file of its own: program into program.go,
// invoke into invoke.go; until then they are not found here, so a server
// listing one leaves it out.

// NativeTool is what a server's listing reads of a native tool;
// *mcpkit.Tool is one.
type NativeTool interface {
	Name() string
	Description() string
	// InputSchema and OutputSchema are the schemas derived from the tool's
	// types; callers must not change them.
	InputSchema() *jsonschema.Schema
	OutputSchema() *jsonschema.Schema
	Listing() *mcp.Tool
	// CheckResult validates a structured result against OutputSchema.
	CheckResult(out any) error
}

// native is a native tool and how a call of it runs: run validates and
// decodes the input through the tool, then does the work.
type native struct {
	tool NativeTool
	run  func(e *callEnv, ctx context.Context, input map[string]any) (any, *Failure)
}

var natives = map[string]native{
	graphQLTool.Name():    {tool: graphQLTool, run: (*callEnv).nativeGraphQL},
	celTool.Name():        {tool: celTool, run: (*callEnv).nativeCEL},
	getTaskTool.Name():    {tool: getTaskTool, run: (*callEnv).nativeGetTask},
	cancelTaskTool.Name(): {tool: cancelTaskTool, run: (*callEnv).nativeCancelTask},
}

// Native describes a native tool the engine runs.
func Native(name string) (NativeTool, bool) {
	n, ok := natives[name]
	return n.tool, ok
}

// Natives lists every native tool the engine runs, by name.
func Natives() []NativeTool {
	tools := make([]NativeTool, 0, len(natives))
	for _, n := range natives {
		tools = append(tools, n.tool)
	}
	slices.SortFunc(tools, func(a, b NativeTool) int { return strings.Compare(a.Name(), b.Name()) })
	return tools
}

// jsonObject is the schema of a map[string]any argument: any JSON object.
// Without it the derived schema would add additionalProperties: true, which
// says nothing more and would change what servers have always listed.
var jsonObject = mcpkit.TypeSchema{Type: reflect.TypeFor[map[string]any](), Schema: &jsonschema.Schema{Type: "object"}}

// decode validates a native tool's input against the schema it lists and
// decodes it.
func decode[In, Out any](tool *mcpkit.Tool[In, Out], input map[string]any) (In, *Failure) {
	args, err := tool.DecodeValue(input)
	if err != nil {
		return args, inputInvalid(err)
	}
	return args, nil
}

// variables are the variables of a graphql or cel call as the caller gave
// them. The decoded arguments hold them too, but through a JSON round trip,
// which turns a script's integers into floats.
func variables(input map[string]any) map[string]any {
	vars, _ := input["variables"].(map[string]any)
	return vars
}
