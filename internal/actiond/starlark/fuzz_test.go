package starlark

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// FuzzCheck: Check never panics on any source an agent can send; a refusal
// is an *Error coded action_input_invalid with a hint and a message that
// gives a place in the script; an accepted script's analysis names each
// tool once, sorted, with a position inside the script, and checking the
// same source again gives the same answer.
func FuzzCheck(f *testing.F) {
	f.Add("def run(event):\n    return tools.get_account(id=event[\"id\"])\n")
	f.Add("Q = \"query { kv { value(namespace: \\\"n\\\", key: \\\"k\\\") { value } } }\"\ndef fetch(doc):\n    return graphql(doc, variables={\"a\": 1})\ndef run(event):\n    return fetch(Q)\n")
	f.Add("def run(event):\n    t = getattr(tools, \"x\")\n    return [f(1) for f in [t, tools.y]]\n")
	f.Add("load(\"x.star\", \"y\")\ndef run(event):\n    return 1\n")
	f.Add("def run(a, b):\n    pass\n")
	f.Add("def run(*event):\n    return lambda: graphql(event)\n")
	f.Add("def run(event):\n    return cel(\"1 + 1\", {}) if event else set([1])\n")
	f.Add("x = (((((((((((((((((((((((((1)))))))))))))))))))))))))\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, source string) {
		script := Script{Name: "program.star", Source: source}
		analysis, err := Check(script)
		again, errAgain := Check(script)
		if (err == nil) != (errAgain == nil) || (err != nil && err.Error() != errAgain.Error()) {
			t.Fatalf("checking twice: %v, then %v", err, errAgain)
		}
		if err != nil {
			var se *Error
			if !errors.As(err, &se) || se.Code != CodeInputInvalid || se.Hint == "" || se.Message == "" {
				t.Fatalf("refusal %T %v", err, err)
			}
			if !strings.Contains(se.Message, "program.star") {
				t.Fatalf("refusal names no place in the script: %s", se.Message)
			}
			return
		}
		if analysis != again {
			t.Fatal("a second check compiled again")
		}
		if !slices.IsSorted(analysis.ToolNames) || len(slices.Compact(slices.Clone(analysis.ToolNames))) != len(analysis.ToolNames) {
			t.Fatalf("tool names %q", analysis.ToolNames)
		}
		// Starlark reads a lone \r (old Mac files) as a newline too, as
		// \r\n; the fuzzer's first find was this test counting only \n.
		lines := strings.Count(strings.ReplaceAll(strings.ReplaceAll(source, "\r\n", "\n"), "\r", "\n"), "\n") + 1
		inside := func(p Position) bool { return p.File == "program.star" && p.Line >= 1 && p.Line <= lines && p.Col >= 1 }
		for _, name := range analysis.ToolNames {
			if p, ok := analysis.ToolPositions[name]; !ok || !inside(p) {
				t.Fatalf("tool %s at %v", name, p)
			}
		}
		for _, use := range analysis.GraphQL {
			if !inside(use.Call) || len(use.Route) == 0 || !slices.IsSorted(use.Variables) {
				t.Fatalf("graphql use %+v", use)
			}
		}
		for _, p := range analysis.RunTimeGraphQL {
			if !inside(p) {
				t.Fatalf("run-time graphql() at %v", p)
			}
		}
	})
}
