// Command baremcp is the benchmark's baseline: a bare go-sdk stateless
// Streamable HTTP server answering one CEL tool, with no record and no auth.
// actiond's recorded, authenticated tools/call is measured against it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"

	"cel.dev/cel-go/cel"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "listen address")
	expression := flag.String("expr", "input.n * 2.0", "CEL expression over input")
	flag.Parse()
	env, err := cel.NewEnv(cel.Variable("input", cel.DynType))
	if err != nil {
		log.Fatal(err)
	}
	ast, issues := env.Compile(*expression)
	if issues.Err() != nil {
		log.Fatal(issues.Err())
	}
	program, err := env.Program(ast)
	if err != nil {
		log.Fatal(err)
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "1"}, nil)
	server.AddTool(&mcp.Tool{Name: "double", InputSchema: map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var input map[string]any
			if err := json.Unmarshal(req.Params.Arguments, &input); err != nil {
				return nil, err
			}
			out, _, err := program.ContextEval(ctx, map[string]any{"input": input})
			if err != nil {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil
			}
			value := map[string]any{"value": out.Value()}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(out.Value())}}, StructuredContent: value}, nil
		})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	fmt.Fprintf(os.Stderr, "baremcp: listening on %s\n", *addr)
	log.Fatal(http.ListenAndServe(*addr, handler))
}
