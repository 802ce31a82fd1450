package starlark

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func check(t *testing.T, source string) *Analysis {
	t.Helper()
	a, err := Check(Script{Name: "program.star", Source: source})
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	return a
}

// ACT-337: a script refused before it runs is action_input_invalid, with
// file:line:col.
func TestCheckRefusesACT337(t *testing.T) {
	for _, tc := range []struct{ name, source, want string }{
		{"syntax", "def run(event):\n    return {\n", "program.star:3:1: got outdent, want primary expression"},
		{"undefined name", "def run(event):\n    return nope\n", "program.star:2:12: undefined: nope"},
		{"no run", "def main(event):\n    return 1\n", "program.star: the script does not define run"},
		{"run with two parameters", "def run(event, x):\n    return 1\n", "program.star:1:1: run takes one parameter, event, not 2"},
		{"run with *args", "def run(*event):\n    return 1\n", "program.star:1:1: run takes one plain parameter"},
		{"run not a function", "run = 1\n", "the script does not define run"},
		{"load", "load(\"x.star\", \"y\")\ndef run(event):\n    return y\n", "program.star:1:1: load is not available"},
		{"while", "def run(event):\n    while True:\n        pass\n", "program.star:2:5: this Starlark dialect does not support while loops"},
		{"top-level for", "for i in []:\n    pass\ndef run(event):\n    return 1\n", "program.star:1:1: for loop not within a function"},
		{"two errors", "def run(event):\n    return a + b\n", "program.star:2:12: undefined: a\nprogram.star:2:16: undefined: b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Check(Script{Name: "program.star", Source: tc.source})
			e := scriptError(t, err)
			if e.Code != CodeInputInvalid || !strings.Contains(e.Message, tc.want) {
				t.Fatalf("got %q %q", e.Code, e.Message)
			}
			// Run refuses it the same way, before running anything.
			host := echoHost()
			_, err = Run(t.Context(), Script{Name: "program.star", Source: tc.source}, nil, host, Limits{})
			if e := scriptError(t, err); e.Code != CodeInputInvalid {
				t.Fatalf("Run: %v", err)
			}
		})
	}
}

// Recursion is refused when it happens.
func TestRecursionRefused(t *testing.T) {
	_, err := runScript(t, echoHost(), `def f(n):
    return f(n - 1) if n else 0

def run(event):
    return f(3)
`, nil)
	if e := scriptError(t, err); e.Code != CodeActionFailure || !strings.Contains(e.Message, "called recursively") {
		t.Fatalf("got %v", err)
	}
}

// ACT-336: every tools.<name> is collected before the script runs.
func TestCheckToolNamesACT336(t *testing.T) {
	a := check(t, `def helper(x):
    return tools.get_account({"id": x})

def run(event):
    f = getattr(tools, "list_accounts")
    tools.notify_human_ops({})
    return helper(1), tools.get_account({})
`)
	if want := []string{"get_account", "list_accounts", "notify_human_ops"}; !reflect.DeepEqual(a.ToolNames, want) {
		t.Fatalf("ToolNames %v", a.ToolNames)
	}
	if got := a.ToolPositions["get_account"].String(); got != "program.star:2:18" {
		t.Fatalf("position %s", got)
	}
	if a.ToolsDynamic {
		t.Fatal("ToolsDynamic set")
	}
	if a := check(t, "def run(event):\n    t = tools\n    return getattr(t, event[\"data\"])({})\n"); !a.ToolsDynamic {
		t.Fatal("ToolsDynamic not set for tools used as a value")
	}
}

// A name of the script's own that shadows nothing predeclared is not a tool.
func TestCheckToolsShadowed(t *testing.T) {
	a := check(t, "def run(event):\n    tools = struct(x=1)\n    return tools.x\n")
	if len(a.ToolNames) != 0 || a.ToolsDynamic {
		t.Fatalf("got %+v", a)
	}
}

// ACT-332, ACT-333, ACT-334, ACT-335, ACT-338: documents reaching graphql() as literals,
// constants or through the script's own functions are known before it runs,
// with operation_name, the variables passed, and how they reach the call.
func TestCheckGraphQLDocumentsACT332(t *testing.T) {
	a := check(t, `QUERY = """query Account($id: ID!) { account(id: $id) { name } }"""
FRAGMENT = "fragment F on Account { id }"
BOTH = QUERY + FRAGMENT

def fetch(doc, id, op=None):
    return graphql(doc, variables={"id": id}, operation_name=op)

def run(event):
    a = graphql("{ ping }")
    b = fetch(QUERY, event["data"]["id"], op="Account")
    vars = {"id": 1, "extra": 2}
    c = graphql(BOTH, vars, "Account", True)
    name = "Q"
    d = graphql(document="query Q { x }", operation_name=name)
    return [a, b, c, d]
`)
	want := []GraphQLUse{
		{
			Call: Position{"program.star", 6, 19}, Document: `query Account($id: ID!) { account(id: $id) { name } }`,
			OperationName: "Account", OperationNameKnown: true, Variables: []string{"id"}, VariablesKnown: true,
			Route: []string{"the string literal at program.star:1:9", "the constant QUERY (program.star:1:1)", "passed as doc to fetch() at program.star:10:14"},
		},
		{
			Call: Position{"program.star", 9, 16}, Document: "{ ping }", OperationNameKnown: true, Variables: []string{}, VariablesKnown: true,
			Route: []string{"the string literal at program.star:9:17"},
		},
		{
			Call: Position{"program.star", 12, 16}, Document: `query Account($id: ID!) { account(id: $id) { name } }fragment F on Account { id }`,
			OperationName: "Account", OperationNameKnown: true, Variables: []string{"extra", "id"}, VariablesKnown: true,
			Route: []string{"the concatenation at program.star:3:14", "the constant BOTH (program.star:3:1)"},
		},
		{
			Call: Position{"program.star", 14, 16}, Document: "query Q { x }", OperationName: "Q", OperationNameKnown: true, Variables: []string{}, VariablesKnown: true,
			Route: []string{"the string literal at program.star:14:26"},
		},
	}
	if !reflect.DeepEqual(a.GraphQL, want) {
		t.Fatalf("got  %+v\nwant %+v", a.GraphQL, want)
	}
	if len(a.RunTimeGraphQL) != 0 {
		t.Fatalf("run time: %v", a.RunTimeGraphQL)
	}
	if got := a.GraphQL[0].Describe(); got != "the string literal at program.star:1:9, the constant QUERY (program.star:1:1), passed as doc to fetch() at program.star:10:14, reaches graphql() at program.star:6:19" {
		t.Fatalf("Describe: %s", got)
	}
}

// ACT-340, ACT-341: documents chosen at run time, or passed with a check
// argument other than True, are left to run time.
func TestCheckGraphQLRunTimeACT340(t *testing.T) {
	for _, tc := range []struct{ name, source string }{
		{"conditional", `def run(event):
    return graphql("{ a }" if event["data"] else "{ b }")
`},
		{"loop element", `def run(event):
    for doc in ["{ a }", "{ b }"]:
        graphql(doc)
`},
		{"check=False", `def run(event):
    return graphql("{ bad", check=False)
`},
		{"check from a variable", `def run(event):
    c = True
    return graphql("{ a }", check=c)
`},
		{"from the event", `def run(event):
    return graphql(event["data"]["doc"])
`},
		{"formatted", `def run(event):
    return graphql("{ %s }" % event["data"])
`},
		{"reassigned", `def run(event):
    doc = "{ a }"
    doc = doc + " "
    return graphql(doc)
`},
		{"lambda", `def run(event):
    f = lambda d: graphql(d)
    return f("{ a }")
`},
		{"*args", `def run(event):
    args = ["{ a }"]
    return graphql(*args)
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := check(t, tc.source)
			if len(a.GraphQL) != 0 || len(a.RunTimeGraphQL) != 1 {
				t.Fatalf("got %+v", a)
			}
		})
	}
}

// A function used as a value may be called from anywhere: its documents from
// the calls the analysis sees are known, and the call is also left to run
// time.
func TestCheckGraphQLEscapingFunction(t *testing.T) {
	a := check(t, `def fetch(doc):
    return graphql(doc)

def run(event):
    f = fetch
    return [fetch("{ a }"), f(event["data"])]
`)
	if len(a.GraphQL) != 1 || a.GraphQL[0].Document != "{ a }" || len(a.RunTimeGraphQL) != 1 {
		t.Fatalf("got %+v", a)
	}
}

// Nested functions read their enclosing function's parameters on the path.
func TestCheckGraphQLNestedFunction(t *testing.T) {
	a := check(t, `def outer(doc):
    def inner():
        return graphql(doc)
    return inner()

def run(event):
    return outer("{ a }")
`)
	if len(a.GraphQL) != 1 || a.GraphQL[0].Document != "{ a }" || len(a.RunTimeGraphQL) != 0 {
		t.Fatalf("got %+v", a)
	}
	if got := a.GraphQL[0].Route; !reflect.DeepEqual(got, []string{"the string literal at program.star:7:18", "passed as doc to outer() at program.star:7:17"}) {
		t.Fatalf("route %v", got)
	}
}

// Variables the analysis cannot read are marked unknown, the document known.
func TestCheckGraphQLUnknownVariables(t *testing.T) {
	a := check(t, `def run(event):
    return graphql("query Q($a: Int) { x(a: $a) }", event["data"], operation_name=event["op"])
`)
	if len(a.GraphQL) != 1 || a.GraphQL[0].VariablesKnown || a.GraphQL[0].OperationNameKnown {
		t.Fatalf("got %+v", a.GraphQL)
	}
}

// Check and Run share one compilation per source.
func TestCompileCached(t *testing.T) {
	script := Script{Name: "cached.star", Source: "def run(event):\n    return 1\n"}
	first, err := compile(script)
	if err != nil {
		t.Fatal(err)
	}
	second, err := compile(script)
	if err != nil {
		t.Fatal(err)
	}
	if first != second {
		t.Fatal("compiled twice")
	}
	renamed, err := compile(Script{Name: "other.star", Source: script.Source})
	if err != nil {
		t.Fatal(err)
	}
	if renamed == first {
		t.Fatal("a different name shares the compiled program, and its positions")
	}
}

// A deep call graph is analysed in bounded time: paths past maxPaths are
// left to run time. A cycle of calls is not followed.
func TestCheckGraphQLDeepAndCyclicCalls(t *testing.T) {
	var b strings.Builder
	b.WriteString("def f0(doc):\n    return graphql(doc)\n")
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&b, "def f%d(doc):\n    return [f%d(doc), f%d(doc)]\n", i, i-1, i-1)
	}
	b.WriteString("def run(event):\n    return f30(\"{ a }\")\n")
	a := check(t, b.String())
	if len(a.GraphQL) != maxPaths || len(a.RunTimeGraphQL) != 1 {
		t.Fatalf("got %d uses, run time %v", len(a.GraphQL), a.RunTimeGraphQL)
	}
	a = check(t, `def f(doc):
    return g(doc)

def g(doc):
    return graphql(doc) if doc else f(doc)

def run(event):
    return f("{ a }")
`)
	if len(a.RunTimeGraphQL) != 1 {
		t.Fatalf("got %+v", a)
	}
}
