package starlark

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/actiond/expr"
	"github.com/incusspawn/isx/internal/coded"
)

// fakeHost is the unit-test seam for Host; the MCP endpoint's integration
// tests exercise the real one.
type fakeHost struct {
	tools   map[string]func(input any) (any, error)
	natives map[string]bool
	graphql func(GraphQLRequest) (any, error)
	cel     func(expression string, vars map[string]any) (any, error)
	calls   []string
}

func (h *fakeHost) HasTool(name string) bool {
	_, ok := h.tools[name]
	return ok
}

func (h *fakeHost) HasNative(name string) bool { return h.natives[name] }

func (h *fakeHost) CallTool(ctx context.Context, name string, input any) (any, error) {
	h.calls = append(h.calls, "tools."+name)
	return h.tools[name](input)
}

func (h *fakeHost) GraphQL(ctx context.Context, request GraphQLRequest) (any, error) {
	h.calls = append(h.calls, "graphql")
	return h.graphql(request)
}

func (h *fakeHost) CEL(ctx context.Context, expression string, vars map[string]any) (any, error) {
	h.calls = append(h.calls, "cel")
	return h.cel(expression, vars)
}

func echoHost() *fakeHost {
	return &fakeHost{
		tools: map[string]func(any) (any, error){
			"echo": func(input any) (any, error) { return input, nil },
			"deny": func(any) (any, error) {
				return nil, &Error{Base: coded.Base{Code: "policy_denied", Message: "INSERT on financial.KVValue denied by the server", Hint: "ask for INSERT", Err: errors.New("full detail: policy 3 of action 42")}}
			},
		},
		natives: map[string]bool{NativeGraphQL: true, NativeCEL: true},
		graphql: func(r GraphQLRequest) (any, error) {
			return map[string]any{"document": r.Document, "variables": r.Variables, "operation": r.OperationName}, nil
		},
		cel: func(expression string, vars map[string]any) (any, error) {
			return map[string]any{"expression": expression, "vars": vars}, nil
		},
	}
}

func runScript(t *testing.T, host Host, source string, data any) (any, error) {
	t.Helper()
	return Run(context.Background(), Script{Name: "program.star", Source: source}, map[string]any{"data": data}, host, Limits{})
}

func mustRun(t *testing.T, host Host, source string, data any) any {
	t.Helper()
	out, err := runScript(t, host, source, data)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return out
}

func scriptError(t *testing.T, err error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not *Error", err, err)
	}
	return e
}

// ACT-323, ACT-324, ACT-326: run(event) reads event["data"] and its return
// value is the result.
func TestRunReturnsResultACT323(t *testing.T) {
	out := mustRun(t, echoHost(), `def run(event):
    return {"x": event["data"]["a"] + 1, "t": (1, "two", None, True, 1.5)}
`, map[string]any{"a": float64(4)})
	want := map[string]any{"x": int64(5), "t": []any{int64(1), "two", nil, true, 1.5}}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("got %#v, want %#v", out, want)
	}
}

// The json module and struct are builtins; a struct's JSON form is an object.
func TestJSONAndStructBuiltins(t *testing.T) {
	out := mustRun(t, echoHost(), `def run(event):
    s = struct(a=1, b=[True])
    decoded = json.decode(event["data"])
    return {"s": s, "encoded": json.encode({"k": decoded["n"]}), "big": 1 << 70}
`, `{"n": 5}`)
	want := map[string]any{"s": map[string]any{"a": int64(1), "b": []any{true}}, "encoded": `{"k":5}`, "big": json.Number("1180591620717411303424")}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("got %#v", out)
	}
}

// A script without a name is named script.star in its tracebacks.
func TestUnnamedScript(t *testing.T) {
	_, err := Run(context.Background(), Script{Source: "def run(event):\n    fail(\"x\")\n"}, nil, echoHost(), Limits{})
	if e := scriptError(t, err); !strings.Contains(e.Message, "script.star:2:9: in run") {
		t.Fatalf("got %q", e.Message)
	}
}

// ACT-325: tools.<name>(input) calls the host with the input and returns
// the tool's output.
func TestToolCallACT325(t *testing.T) {
	host := echoHost()
	out := mustRun(t, host, `def run(event):
    a = tools.echo({"n": event["data"]["n"], "l": [1, 2]})
    b = tools.echo()
    return [a, b]
`, map[string]any{"n": "x"})
	want := []any{map[string]any{"n": "x", "l": []any{int64(1), int64(2)}}, map[string]any{}}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("got %#v, want %#v", out, want)
	}
	if !reflect.DeepEqual(host.calls, []string{"tools.echo", "tools.echo"}) {
		t.Fatalf("calls %v", host.calls)
	}
}

// ACT-336 at run time: a tool the host does not offer is tool_not_declared,
// naming the tool, and nothing is called.
func TestToolNotDeclaredACT336(t *testing.T) {
	host := echoHost()
	_, err := runScript(t, host, `def run(event):
    return tools.get_account({})
`, nil)
	e := scriptError(t, err)
	if e.Code != CodeToolNotDeclared || !strings.Contains(e.Message, "tools.get_account") {
		t.Fatalf("got %q %q", e.Code, e.Message)
	}
	if !strings.HasPrefix(e.Message, "Traceback (most recent call last):\n  program.star:2:17: in run\n") {
		t.Fatalf("message %q", e.Message)
	}
	if len(host.calls) != 0 {
		t.Fatalf("calls %v", host.calls)
	}
	// hasattr answers without failing, so a script can test for a tool.
	out := mustRun(t, host, `def run(event):
    return [hasattr(tools, "echo"), hasattr(tools, "nope")]
`, nil)
	if !reflect.DeepEqual(out, []any{true, false}) {
		t.Fatalf("hasattr: %v", out)
	}
}

// ACT-344, ACT-345: a tool error not caught ends the script with the tool's
// code and hint, the message led by the traceback, and keeps the host's
// error in the chain for the record.
func TestToolErrorUncaughtACT345(t *testing.T) {
	_, err := runScript(t, echoHost(), `def run(event):
    tools.echo({})
    tools.deny({"x": 1})
    return 1
`, nil)
	e := scriptError(t, err)
	want := "Traceback (most recent call last):\n  program.star:3:15: in run\nError in tools.deny: INSERT on financial.KVValue denied by the server"
	if e.Code != "policy_denied" || e.Message != want || e.Hint != "ask for INSERT" {
		t.Fatalf("got code %q hint %q message %q", e.Code, e.Hint, e.Message)
	}
	if !strings.Contains(fmt.Sprint(errors.Unwrap(errors.Unwrap(e))), "policy 3 of action 42") {
		t.Fatalf("host error lost: %v", errors.Unwrap(e))
	}
}

// check=False returns {"ok": ..., "value"/"error": ...} instead of failing.
func TestCheckFalseShape(t *testing.T) {
	host := echoHost()
	host.natives = map[string]bool{}
	out := mustRun(t, host, `def run(event):
    return [
        tools.echo({"a": 1}, check=False),
        tools.deny({}, check=False),
        graphql("{ x }", check=False),
        cel("1 + 1", check=False),
    ]
`, nil)
	notDeclared := func(what string) map[string]any {
		return map[string]any{"ok": false, "error": map[string]any{
			"code": CodeToolNotDeclared, "message": what + " is not offered to this script",
			"hint": "Call only the tools the server or action lists; graphql() and cel() need the native tool of that name listed."}}
	}
	want := []any{
		map[string]any{"ok": true, "value": map[string]any{"a": int64(1)}},
		map[string]any{"ok": false, "error": map[string]any{"code": "policy_denied", "message": "INSERT on financial.KVValue denied by the server", "hint": "ask for INSERT"}},
		notDeclared("graphql()"),
		notDeclared("cel()"),
	}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("got  %#v\nwant %#v", out, want)
	}
	if !reflect.DeepEqual(host.calls, []string{"tools.echo", "tools.deny"}) {
		t.Fatalf("calls %v", host.calls)
	}
}

// ACT-327, ACT-328, ACT-408: graphql() and cel() exist only when the host
// offers them; otherwise the call fails with tool_not_declared.
func TestNativesNotOfferedACT327(t *testing.T) {
	for _, call := range []string{`graphql("{ x }")`, `cel("1")`} {
		host := echoHost()
		host.natives = map[string]bool{}
		_, err := runScript(t, host, "def run(event):\n    return "+call+"\n", nil)
		if e := scriptError(t, err); e.Code != CodeToolNotDeclared {
			t.Fatalf("%s: code %q", call, e.Code)
		}
		if len(host.calls) != 0 {
			t.Fatalf("%s: calls %v", call, host.calls)
		}
	}
}

// ACT-327: graphql(document, variables, operation_name) reaches the host.
func TestGraphQLAndCELCallsACT327(t *testing.T) {
	out := mustRun(t, echoHost(), `def run(event):
    g = graphql("query Q($id: ID!) { a(id: $id) { b } }", {"id": "7"}, operation_name="Q")
    c = cel("x + 1", vars={"x": 2})
    return [g, c]
`, nil)
	want := []any{
		map[string]any{"document": "query Q($id: ID!) { a(id: $id) { b } }", "variables": map[string]any{"id": "7"}, "operation": "Q"},
		map[string]any{"expression": "x + 1", "vars": map[string]any{"x": int64(2)}},
	}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("got %#v", out)
	}
}

// ACT-439, ACT-346: the exact traceback shape of the seed's example.
func TestTracebackSeedExampleACT439(t *testing.T) {
	source := `# Ten times the ratio of two balances.
def ratio(a, b):
    return (a // b)

def run(event):
    data = event["data"]
    a = data["a"]
    b = data["b"]
    return 10 * ratio(a, b)
`
	_, err := runScript(t, echoHost(), source, map[string]any{"a": 10, "b": 0})
	e := scriptError(t, err)
	want := "Traceback (most recent call last):\n  program.star:9:22: in run\n  program.star:3:15: in ratio\nError: floored division by zero"
	if e.Code != CodeActionFailure || e.Message != want {
		t.Fatalf("got %q\n%q", e.Code, e.Message)
	}
}

// ACT-343, ACT-345: fail(...) is action_failure, named on the error line.
func TestFailACT345(t *testing.T) {
	_, err := runScript(t, echoHost(), `def check(x):
    if x < 0:
        fail("negative amount:", x)

def run(event):
    check(-1)
`, nil)
	e := scriptError(t, err)
	want := "Traceback (most recent call last):\n  program.star:6:10: in run\n  program.star:3:13: in check\nError in fail: negative amount: -1"
	if e.Code != CodeActionFailure || e.Message != want || e.Hint == "" {
		t.Fatalf("got %q %q %q", e.Code, e.Message, e.Hint)
	}
}

// Frames of builtins between the script's own frames are left out.
func TestTracebackSkipsBuiltinFrames(t *testing.T) {
	_, err := runScript(t, echoHost(), `def key(x):
    return 1 // x

def run(event):
    return sorted([1, 0], key=key)
`, nil)
	e := scriptError(t, err)
	want := "Traceback (most recent call last):\n  program.star:5:18: in run\n  program.star:2:14: in key\nError: floored division by zero"
	if e.Message != want {
		t.Fatalf("got %q", e.Message)
	}
}

// A result that is not JSON is action_failure naming the type and where it is.
func TestResultNotJSON(t *testing.T) {
	for source, want := range map[string]string{
		"def run(event):\n    return {\"a\": [1, run]}\n":              `the value run returned["a"][1] is a value of type function`,
		"def run(event):\n    return {1: 2}\n":                         "has the key 1 of type int",
		"def run(event):\n    return set([1])\n":                       "is a value of type set",
		"def run(event):\n    return float(\"nan\")\n":                 "float nan",
		"def run(event):\n    l = []\n    l.append(l)\n    return l\n": "nested more than",
	} {
		_, err := runScript(t, echoHost(), source, nil)
		e := scriptError(t, err)
		if e.Code != CodeActionFailure || !strings.Contains(e.Message, want) {
			t.Errorf("%s: got %q %q", source, e.Code, e.Message)
		}
	}
}

// A failure of the host itself is not a tool error: it cannot be caught and
// Run returns it wrapped, not as *Error.
func TestHostFailure(t *testing.T) {
	down := errors.New("database unavailable")
	host := echoHost()
	host.tools["broken"] = func(any) (any, error) { return nil, down }
	for _, call := range []string{"tools.broken({}, check=False)", "tools.broken({})"} {
		_, err := runScript(t, host, "def run(event):\n    return "+call+"\n", nil)
		var e *Error
		if !errors.Is(err, down) || errors.As(err, &e) {
			t.Fatalf("%s: got %v", call, err)
		}
	}
}

// ACT-370, ACT-371, ACT-372: at most 64 calls of each kind; the 65th fails
// with limit_exceeded naming the limit, and is not made.
func TestCallLimitsACT370(t *testing.T) {
	for _, tc := range []struct{ call, what, host string }{
		{`tools.echo({})`, "64 tool calls", "tools.echo"},
		{`graphql("{ x }")`, "64 graphql calls", "graphql"},
		{`cel("1")`, "64 cel calls", "cel"},
	} {
		host := echoHost()
		source := fmt.Sprintf("def run(event):\n    for i in range(event[\"data\"]):\n        %s\n", tc.call)
		mustRun(t, host, source, 64)
		host.calls = nil
		_, err := runScript(t, host, source, 65)
		e := scriptError(t, err)
		if e.Code != CodeLimitExceeded || !strings.Contains(e.Message, tc.what) {
			t.Fatalf("%s: got %q %q", tc.call, e.Code, e.Message)
		}
		if len(host.calls) != 64 {
			t.Fatalf("%s: %d calls made", tc.call, len(host.calls))
		}
		// check=False does not catch a limit.
		_, err = runScript(t, host, strings.Replace(source, ")\n", ", check=False)\n", 1), 65)
		if e := scriptError(t, err); e.Code != CodeLimitExceeded {
			t.Fatalf("%s check=False: %q", tc.call, e.Code)
		}
	}
}

// ACT-373: at most 1,000,000 execution steps by default.
func TestStepLimitACT373(t *testing.T) {
	_, err := runScript(t, echoHost(), `def run(event):
    n = 0
    for i in range(10000000):
        n += i
    return n
`, nil)
	e := scriptError(t, err)
	if e.Code != CodeLimitExceeded || !strings.Contains(e.Message, "limit of 1000000 execution steps") ||
		!strings.HasPrefix(e.Message, "Traceback (most recent call last):\n  program.star:") {
		t.Fatalf("got %q %q", e.Code, e.Message)
	}
	// A smaller limit is honoured, and a script within it runs.
	script := Script{Name: "t.star", Source: "def run(event):\n    return len([i for i in range(event[\"data\"])])\n"}
	if _, err := Run(context.Background(), script, map[string]any{"data": 10}, echoHost(), Limits{MaxSteps: 1000}); err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), script, map[string]any{"data": 100000}, echoHost(), Limits{MaxSteps: 1000})
	if e := scriptError(t, err); e.Code != CodeLimitExceeded || !strings.Contains(e.Message, "limit of 1000 execution") {
		t.Fatalf("got %v", err)
	}
}

// expiringContext is a context whose deadline the test expires by hand, so
// that a deadline in the middle of a run is tested without sleeping.
type expiringContext struct {
	context.Context
	done chan struct{}
	mu   sync.Mutex
	err  error
}

func newExpiringContext() *expiringContext {
	return &expiringContext{Context: context.Background(), done: make(chan struct{})}
}

func (c *expiringContext) Done() <-chan struct{} { return c.done }

func (c *expiringContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *expiringContext) expire(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
		close(c.done)
	}
}

// ACT-374, ACT-377: a script whose context ends is stopped promptly, even in
// a loop that never calls the host again, with an error the caller maps to
// mcp_request_deadline.
func TestContextStopsScriptACT374(t *testing.T) {
	for _, tc := range []struct {
		code string
		err  error
	}{
		{CodeDeadlineExceeded, context.DeadlineExceeded},
		{CodeCancelled, context.Canceled},
	} {
		ctx := newExpiringContext()
		host := echoHost()
		host.tools["stop"] = func(any) (any, error) {
			ctx.expire(tc.err)
			return nil, nil
		}
		_, err := Run(ctx, Script{Name: "program.star", Source: `def run(event):
    tools.stop({})
    n = 0
    for i in range(1000000000):
        n += 1
    return n
`}, nil, host, Limits{MaxSteps: 1 << 62})
		e := scriptError(t, err)
		if e.Code != tc.code || !errors.Is(err, tc.err) || !strings.Contains(e.Message, "in run\nError: the script was stopped: "+tc.err.Error()) {
			t.Fatalf("got %q %q", e.Code, e.Message)
		}
	}
}

// A context that has already ended runs nothing.
func TestContextEndedBeforeRun(t *testing.T) {
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	host := echoHost()
	_, err := Run(ctx, Script{Name: "program.star", Source: "def run(event):\n    return tools.echo({})\n"}, nil, host, Limits{})
	if e := scriptError(t, err); e.Code != CodeDeadlineExceeded || !errors.Is(err, context.DeadlineExceeded) || len(host.calls) != 0 {
		t.Fatalf("got %v, calls %v", err, host.calls)
	}
}

// One compiled script runs concurrently, each run with its own thread,
// globals and call counts.
func TestConcurrentRuns(t *testing.T) {
	script := Script{Name: "program.star", Source: `COUNT = [0]

def run(event):
    COUNT[0] += 1
    for i in range(60):
        tools.echo({})
    return {"n": event["data"], "count": COUNT[0], "d": str(decimal("1.5") * decimal(event["data"]))}
`}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			host := echoHost()
			out, err := Run(context.Background(), script, map[string]any{"data": i}, host, Limits{})
			if err != nil {
				errs <- err
				return
			}
			product, err := expr.MustParseDecimal("1.5").Mul(expr.DecimalFromInt(int64(i)))
			if err != nil {
				errs <- err
				return
			}
			want := map[string]any{"n": int64(i), "count": int64(1), "d": product.String()}
			if !reflect.DeepEqual(out, want) {
				errs <- fmt.Errorf("run %d: got %v, want %v", i, out, want)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
