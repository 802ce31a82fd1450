package starlark

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

// The unit beside the server's test (server/memory_test.go), which runs
// such programs through actiond: every way a script can build a value
// larger than what it holds is measured first and refused past the
// budget, with limit_exceeded naming the memory limit; a value too large
// to compare, hash or print is refused before the walk; what stays within
// the budget runs as before.
func TestMemoryBudget(t *testing.T) {
	const mebi = 1 << 20
	for _, c := range []struct {
		name, body, says string
	}{
		{"repetition", `return len("x" * (1 << 29))`, "memory limit"},
		{"the issue's comprehension", `return len([("x" * (1 << 28)) + str(i) for i in range(6)])`, "memory limit"},
		{"doubling", "s = \"x\"\n    for i in range(40):\n        s = s + s\n    return len(s)", "memory limit"},
		{"augmented doubling", "s = \"x\"\n    for i in range(40):\n        s += s\n    return len(s)", "memory limit"},
		{"list doubling in place", "l = [0]\n    for i in range(40):\n        l += l\n    return len(l)", "memory limit"},
		{"list repetition", `return len([0] * (1 << 26))`, "memory limit"},
		{"bytes repetition", `return len(b"x" * (1 << 28))`, "memory limit"},
		{"formatting", "s = \"x\" * (40 << 20)\n    return len(\"%s%s\" % (s, s))", "memory limit"},
		{"format", "s = \"x\" * (20 << 20)\n    return len(\"{0}{0}{0}{0}\".format(s))", "memory limit"},
		{"join", "s = \"x\" * (10 << 20)\n    return len(\",\".join([s] * 10))", "memory limit"},
		{"replace", "s = \"x\" * (30 << 20)\n    return len(s.replace(\"\", \"yy\"))", "memory limit"},
		{"split", "s = \",\" * (30 << 20)\n    return len(s.split(\",\"))", "memory limit"},
		{"upper", "s = \"x\" * (40 << 20)\n    return len(s.upper())", "memory limit"},
		{"copies kept", "s = \"x\" * (1 << 20)\n    keep = []\n    for i in range(100):\n        keep.append(s[::-1])\n    return len(keep)", "memory limit"},
		{"list of a range", `return len(list(range(1 << 28)))`, "memory limit"},
		{"sorted", `return len(sorted(range(1 << 27)))`, "memory limit"},
		{"spread", "def f(*a):\n        return len(a)\n    return f(*range(1 << 28))", "memory limit"},
		{"shared list printed", "x = [\"abc\"]\n    for i in range(40):\n        x = [x, x]\n    return len(str(x))", "memory limit"},
		{"shared list returned", "x = [\"abc\"]\n    for i in range(40):\n        x = [x, x]\n    return x", "memory limit"},
		{"shared list as JSON", "x = [\"abc\"]\n    for i in range(40):\n        x = [x, x]\n    return len(json.encode(x))", "memory limit"},
		{"shared list passed to a tool", "x = [\"abc\"]\n    for i in range(40):\n        x = [x, x]\n    return tools.echo({\"x\": x})", "memory limit"},
		{"decoded JSON", "s = \"[\" + \"[],\" * (10 << 20) + \"[]]\"\n    return len(json.decode(s))", "memory limit"},
		{"indented JSON", "s = \"[\" * 20000 + \"]\" * 20000\n    return len(json.indent(s, indent = \"x\" * 1000))", "memory limit"},
		{"shared lists compared", "x, y = [1], [1]\n    for i in range(9):\n        x, y = [x] * 100, [y] * 100\n    return x == y", "larger than a script may use"},
		{"shared lists sorted", "x, y = [1], [1]\n    for i in range(9):\n        x, y = [x] * 100, [y] * 100\n    return sorted([x, y])[0] == x", "larger than a script may use"},
		{"shared tuple hashed", "t = (1,)\n    for i in range(60):\n        t = (t, t)\n    return {t: 1}", "larger than a script may use"},
		{"shared tuple made by a call", "def pair(*a):\n        return a\n    t = 1\n    for i in range(60):\n        t = pair(t, t)\n    return hash(t)", "larger than a script may use"},
		{"shared tuple made by zip", "t = (1,)\n    for i in range(60):\n        t = zip([t], [t])[0]\n    return hash(t)", "larger than a script may use"},
		{"a large integer", "x = 3\n    for i in range(20):\n        x = x * x\n    return x % 7", "larger than a script may use"},
		{"a shifted integer", "x = 1\n    for i in range(10):\n        x = x << 500\n    return x % 7", "larger than a script may use"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := runScript(t, echoHost(), "def run(event):\n    "+c.body+"\n", nil)
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeLimitExceeded || !strings.Contains(e.Message, c.says) || e.Hint == "" {
				t.Fatalf("got %v, want %s saying %q", err, CodeLimitExceeded, c.says)
			}
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			if grown := int64(after.TotalAlloc - before.TotalAlloc); grown > 4*DefaultMaxAllocBytes {
				t.Errorf("the refused script allocated %d MiB", grown/mebi)
			}
		})
	}

	// The message names the limit and what would have been built.
	_, err := runScript(t, echoHost(), "def run(event):\n    return len(\"x\" * (1 << 29))\n", nil)
	if !strings.Contains(err.Error(), "64.0 MiB, its memory limit, by building a string of 512.0 MiB") || !strings.Contains(err.Error(), "program.star:2:") {
		t.Errorf("the refusal: %v", err)
	}

	// Within the budget, what scripts do runs as before.
	out, err := runScript(t, echoHost(), `def run(event):
    parts = []
    for i in range(10000):
        parts.append("line %d" % i)
    text = "\n".join(parts)
    rows = [{"n": i, "name": str(i)} for i in range(10000)]
    counts = {}
    for row in rows:
        counts[row["n"] % 7] = counts.get(row["n"] % 7, 0) + 1
    big = "y" * (20 << 20)
    x, y = [1], [1]
    for i in range(3):
        x, y = [x] * 10, [y] * 10
    return [len(text), len(text.split("\n")), counts[3], len(big[1:]), x == y, sorted([3, 1, 2]), (1, (2, 3)) in {(1, (2, 3)): 1}]
`, nil)
	if err != nil || asJSON(out) != `[98889,10000,1429,20971519,true,[1,2,3],true]` {
		t.Errorf("a script within the budget: %s %v", asJSON(out), err)
	}

	// A configured budget is the limit.
	_, err = Run(context.Background(), Script{Source: "def run(event):\n    return len(\"x\" * (2 << 20))\n"}, map[string]any{"data": nil}, echoHost(), Limits{MaxAllocBytes: 1 << 20})
	if !strings.Contains(fmtErr(err), "1.0 MiB, its memory limit") {
		t.Errorf("a budget of 1 MiB: %v", err)
	}
}

// sorted stops at the run's deadline between comparisons.
func TestSortedStopsAtTheDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	source := "def run(event):\n    xs = [str(i * 7919 % 1000003) for i in range(400000)]\n    return len(sorted(xs))\n"
	_, err := Run(ctx, Script{Source: source}, map[string]any{"data": nil}, echoHost(), Limits{MaxSteps: 1 << 40})
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeDeadlineExceeded {
		t.Fatalf("got %v, want %s", err, CodeDeadlineExceeded)
	}
}

// A gate lets its size of runs through at once; the next waits, and gives
// up at its deadline.
func TestGateBoundsRunsAtOnce(t *testing.T) {
	gate := NewGate(1)
	release, err := gate.enter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = Run(ctx, Script{Source: "def run(event):\n    return 1\n"}, map[string]any{"data": nil}, echoHost(), Limits{Gate: gate})
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeDeadlineExceeded || !strings.Contains(e.Message, "did not start") {
		t.Fatalf("a run past the gate's size: %v", err)
	}
	release()
	if out, err := Run(context.Background(), Script{Source: "def run(event):\n    return 1\n"}, map[string]any{"data": nil}, echoHost(), Limits{Gate: gate}); err != nil || out != int64(1) {
		t.Fatalf("a run after the place was given back: %v %v", out, err)
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
