package expr_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/actiond/expr"
	"github.com/incusspawn/isx/internal/clock"
)

func mustEnv(t testing.TB, options ...expr.Option) *expr.Env {
	t.Helper()
	env, err := expr.NewEnv(options...)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func eval(t testing.TB, env *expr.Env, src string, vars map[string]any) (any, error) {
	t.Helper()
	program, err := env.Compile(src)
	if err != nil {
		return nil, err
	}
	return program.Eval(context.Background(), vars)
}

// ACT-329: the pure functions (decimal, money, uuid, date, timestamp,
// duration, strings) are available in every environment.
func TestPureFunctions_ACT329(t *testing.T) {
	env := mustEnv(t)
	cases := []struct {
		src  string
		want any
	}{
		{`decimal("10.50")`, "10.50"},
		{`decimal("10.50") + decimal("2")`, "12.50"},
		{`decimal("10.50") - decimal("0.5")`, "10.00"},
		{`decimal("10.50") * decimal("2")`, "21.00"},
		{`decimal("10.50") / decimal("2")`, "5.25"},
		{`decimal("10.00") / decimal("4")`, "2.50"},
		{`decimal("1") / decimal("3")`, "0.3333333333333333333333333333333333"},
		{`decimal("2") / decimal("3")`, "0.6666666666666666666666666666666667"},
		{`decimal("-2") / decimal("3")`, "-0.6666666666666666666666666666666667"},
		{`decimal("0.1") + decimal("0.2") == decimal("0.3")`, true},
		{`decimal("10.50") == decimal("10.5")`, true},
		{`decimal("10.50") < decimal("10.6")`, true},
		{`decimal("-1") >= decimal("0")`, false},
		{`-decimal("1.5")`, "-1.5"},
		{`decimal(3)`, "3"},
		{`decimal("1e3")`, "1000"},
		{`decimal("1.5e-2")`, "0.015"},
		{`decimal(".5")`, "0.5"},
		{`decimal("2.345").round(2)`, "2.34"},
		{`decimal("2.355").round(2)`, "2.36"},
		{`decimal("2.5").round(0)`, "2"},
		{`string(decimal("7.10"))`, "7.10"},
		{`money("5", "USD")`, map[string]any{"amount": "5", "currency": "USD"}},
		{`money("5", "USD") + money("1.25", "USD")`, map[string]any{"amount": "6.25", "currency": "USD"}},
		{`money("5", "USD") - money("7", "USD")`, map[string]any{"amount": "-2", "currency": "USD"}},
		{`money("5", "USD") * 3`, map[string]any{"amount": "15", "currency": "USD"}},
		{`decimal("0.5") * money("5.00", "USD")`, map[string]any{"amount": "2.500", "currency": "USD"}},
		{`money(decimal("9"), "EUR") / 3`, map[string]any{"amount": "3", "currency": "EUR"}},
		{`money("5", "USD") < money("6", "USD")`, true},
		{`money("5", "USD") == money("5.00", "USD")`, true},
		{`money("5", "USD") == money("5", "EUR")`, false},
		{`money("5", "USD").amount() + decimal("1")`, "6"},
		{`money("5", "USD").currency()`, "USD"},
		{`string(money("5.00", "USD"))`, "5.00 USD"},
		{`date("2024-02-29")`, "2024-02-29"},
		{`date("2024-02-29") < date("2024-03-01")`, true},
		{`date(timestamp("2024-03-01T23:30:00-05:00"))`, "2024-03-02"},
		{`timestamp(date("2024-02-29"))`, "2024-02-29T00:00:00Z"},
		{`timestamp("2024-01-02T03:04:05Z") + duration("1h")`, "2024-01-02T04:04:05Z"},
		{`duration("90s")`, "90s"},
		{`uuid("6BA7B810-9DAD-11D1-80B4-00C04FD430C8")`, "6ba7b810-9dad-11d1-80b4-00c04fd430c8"},
		{`"abc".upperAscii()`, "ABC"},
		{`"a,b".split(",")`, []any{"a", "b"}},
		{`strings.quote("a")`, `"a"`},
		{`{"n": 1, "d": 1.5, "b": true, "z": null, "l": [1u]}`, map[string]any{"n": int64(1), "d": 1.5, "b": true, "z": nil, "l": []any{uint64(1)}}},
		{`{1: "one"}`, map[string]any{"1": "one"}},
	}
	for _, c := range cases {
		t.Run(c.src, func(t *testing.T) {
			got, err := eval(t, env, c.src, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(got, c.want) {
				t.Fatalf("got %#v, want %#v", got, c.want)
			}
			if _, err := json.Marshal(got); err != nil {
				t.Fatalf("result does not marshal to JSON: %v", err)
			}
		})
	}
}

func jsonEqual(a, b any) bool {
	x, errA := json.Marshal(a)
	y, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(x, y)
}

func TestEvaluationErrors(t *testing.T) {
	env := mustEnv(t)
	cases := []struct {
		src, message string
		line, column int
	}{
		{`decimal("ten")`, "not a decimal", 1, 8},
		{`decimal("1") / decimal("0")`, "division by zero", 1, 14},
		{`money("5", "USD") + money("1", "EUR")`, "cannot combine USD with EUR", 1, 19},
		{`money("5", "usd")`, "ISO 4217", 1, 6},
		{`date("2024-02-30")`, "YYYY-MM-DD", 1, 5},
		{`uuid("nope")`, "not a UUID", 1, 5},
		{`decimal("1` + strings.Repeat("0", 120) + `")`, "more than 100 digits", 1, 8},
		{`decimal("1` + strings.Repeat("0", 99) + `") * decimal("10")`, "more than 100 digits", 1, 113},
		{`1 / 0`, "division by zero", 1, 3},
	}
	for _, c := range cases {
		t.Run(c.src, func(t *testing.T) {
			_, err := eval(t, env, c.src, nil)
			var e *expr.Error
			if !errors.As(err, &e) {
				t.Fatalf("want *expr.Error, got %v", err)
			}
			if e.Code != "CEL_EVALUATION_ERROR" || e.Stage != expr.StageEvaluate {
				t.Fatalf("code %s stage %s", e.Code, e.Stage)
			}
			if !strings.Contains(e.Error(), c.message) || !strings.Contains(e.Error(), c.src[:5]) {
				t.Fatalf("message %q lacks %q or the expression", e.Error(), c.message)
			}
			if e.Line != c.line || e.Column != c.column {
				t.Fatalf("position %d:%d, want %d:%d", e.Line, e.Column, c.line, c.column)
			}
		})
	}
}

// ACT-027: an expression naming an undeclared variable, such as event, does
// not compile; the error names the expression and the position.
func TestCompileErrors_ACT027(t *testing.T) {
	env := mustEnv(t, expr.Variables("execution", "session"))
	cases := []struct {
		src, message string
		line, column int
	}{
		{`event.data`, "undeclared reference to 'event'", 1, 1},
		{`session.id +`, "Syntax error", 1, 13},
		{"session.id\n  + session", "found no matching overload", 2, 3},
		{`decimal(1.5)`, "found no matching overload", 1, 8},
		{`uuid.New()`, "only available through the cel tool", 1, 1},
		{`time.Now()`, "only available through the cel tool", 1, 1},
	}
	for _, c := range cases {
		t.Run(c.src, func(t *testing.T) {
			_, err := env.Compile(c.src)
			var e *expr.Error
			if !errors.As(err, &e) {
				t.Fatalf("want *expr.Error, got %v", err)
			}
			if e.Stage != expr.StageCompile || e.Code != expr.CodeEvaluation {
				t.Fatalf("stage %s code %s", e.Stage, e.Code)
			}
			if !strings.Contains(e.Error(), c.message) {
				t.Fatalf("message %q lacks %q", e.Error(), c.message)
			}
			if e.Line != c.line || e.Column != c.column {
				t.Fatalf("position %d:%d, want %d:%d", e.Line, e.Column, c.line, c.column)
			}
		})
	}
}

type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("entropy exhausted") }

// ACT-330: uuid.New() and time.Now() exist only in an Env built with Impure,
// and read the injected clock and randomness.
func TestImpureFunctions_ACT330(t *testing.T) {
	start := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	fake := clock.NewFake(start)
	env := mustEnv(t, expr.Impure(fake, repeatReader(0x11)))

	got, err := eval(t, env, `uuid.New()`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got != "11111111-1111-4111-9111-111111111111" {
		t.Fatalf("uuid.New() = %v", got)
	}
	program, err := env.Compile(`time.Now()`)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := program.Eval(context.Background(), nil)
	fake.Advance(90 * time.Second)
	second, _ := program.Eval(context.Background(), nil)
	if first != "2025-06-01T12:00:00Z" || second != "2025-06-01T12:01:30Z" {
		t.Fatalf("time.Now() = %v then %v: must read the injected clock on every evaluation", first, second)
	}
	if got, _ := eval(t, env, `date(time.Now())`, nil); got != "2025-06-01" {
		t.Fatalf("date(time.Now()) = %v", got)
	}

	broken := mustEnv(t, expr.Impure(fake, failingReader{}))
	if _, err := eval(t, broken, `uuid.New()`, nil); err == nil || !strings.Contains(err.Error(), "entropy exhausted") {
		t.Fatalf("a failing randomness source must surface: %v", err)
	}
	if _, err := expr.NewEnv(expr.Impure(nil, repeatReader(0))); err == nil {
		t.Fatal("Impure without a clock must be refused")
	}
	pure := mustEnv(t)
	if _, err := pure.Compile(`uuid.New()`); err == nil {
		t.Fatal("uuid.New() must not compile without Impure")
	}
}

func TestVariables(t *testing.T) {
	env := mustEnv(t, expr.Variables("execution", "session"))
	vars := map[string]any{
		"execution": map[string]any{"input": map[string]any{"subject": "alice", "count": 2.0}},
		"session":   map[string]any{"id": "s1", "input": map[string]any{"principal": "p"}},
	}
	cases := []struct {
		src  string
		want any
	}{
		{`execution.input.subject`, "alice"},
		{`session.id + "/" + session.input.principal`, "s1/p"},
		{`execution.input.count > 1`, true},
		{`int(execution.input.count) + 1`, int64(3)},
		{`execution.input`, map[string]any{"subject": "alice", "count": 2.0}},
	}
	for _, c := range cases {
		got, err := eval(t, env, c.src, vars)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		if !jsonEqual(got, c.want) {
			t.Fatalf("%s = %#v, want %#v", c.src, got, c.want)
		}
	}
	if _, err := eval(t, env, `execution.input.missing`, vars); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("a missing key must be an error naming it: %v", err)
	}
	if _, err := expr.NewEnv(expr.Variables("a", "a")); err == nil {
		t.Fatal("a variable declared twice must be refused")
	}
}

func TestTypedEvaluation(t *testing.T) {
	env := mustEnv(t, expr.Variables("session"))
	program, err := env.Compile(`session.input.a == "x"`)
	if err != nil {
		t.Fatal(err)
	}
	if program.ResultType() != "bool" {
		t.Fatalf("ResultType = %s", program.ResultType())
	}
	ok, err := program.EvalBool(context.Background(), map[string]any{"session": map[string]any{"input": map[string]any{"a": "x"}}})
	if err != nil || !ok {
		t.Fatalf("EvalBool = %v, %v", ok, err)
	}
	if _, err := program.EvalString(context.Background(), map[string]any{"session": map[string]any{"input": map[string]any{"a": "x"}}}); err == nil {
		t.Fatal("EvalString of a bool must fail")
	}
	dyn, _ := env.Compile(`session.input.a`)
	if _, err := dyn.EvalBool(context.Background(), map[string]any{"session": map[string]any{"input": map[string]any{"a": "x"}}}); err == nil || !strings.Contains(err.Error(), "not a bool") {
		t.Fatalf("EvalBool of a string must fail: %v", err)
	}
}

func TestCostLimitAndCancellation(t *testing.T) {
	env := mustEnv(t, expr.CostLimit(1000))
	_, err := eval(t, env, `[1,2,3,4,5,6,7,8,9,10].map(x, [1,2,3,4,5,6,7,8,9,10].map(y, x * y)).size()`, nil)
	if !errors.Is(err, expr.ErrCostLimit) {
		t.Fatalf("want the cost limit error, got %v", err)
	}
	var e *expr.Error
	if !errors.As(err, &e) || e.Code != expr.CodeEvaluation {
		t.Fatalf("want a CEL_EVALUATION_ERROR, got %v", err)
	}

	// Loops over input are tracked at run time under the default limit.
	inputs := mustEnv(t, expr.Variables("execution"))
	items := make([]any, 2000)
	for i := range items {
		items[i] = float64(i)
	}
	_, err = eval(t, inputs, `execution.input.items.map(x, execution.input.items.map(y, y)).size()`,
		map[string]any{"execution": map[string]any{"input": map[string]any{"items": items}}})
	if !errors.Is(err, expr.ErrCostLimit) {
		t.Fatalf("a quadratic loop over input must hit the default cost limit, got %v", err)
	}
	if got, err := eval(t, inputs, `execution.input.items.map(x, x).size()`,
		map[string]any{"execution": map[string]any{"input": map[string]any{"items": items}}}); err != nil || got != int64(2000) {
		t.Fatalf("a linear loop stays under the limit: %v, %v", got, err)
	}

	loop := mustEnv(t)
	program, err := loop.Compile(`[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, a+b+c > 0)))`)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := program.Eval(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled context must stop evaluation: %v", err)
	}
}

func TestProgramsAreSafeForConcurrentUse(t *testing.T) {
	env := mustEnv(t, expr.Variables("session"))
	program, err := env.Compile(`string(size(session.input.principal)) + ':' + session.input.principal`)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			principal := strings.Repeat("p", i+1)
			for range 200 {
				got, err := program.EvalString(context.Background(), map[string]any{"session": map[string]any{"input": map[string]any{"principal": principal}}})
				if err != nil || !strings.HasSuffix(got, ":"+principal) {
					t.Errorf("got %q, %v", got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestFields(t *testing.T) {
	env := mustEnv(t, expr.Variables("session"))
	cases := []struct {
		src    string
		fields []string
		whole  bool
	}{
		{`string(size(session.input.principal)) + ':' + session.input.principal + ':' + session.input.subject`, []string{"principal", "subject"}, false},
		{`session.input["principal"] + session["input"].subject`, []string{"principal", "subject"}, false},
		{`has(session.input.tenant) ? session.input.subject : "x"`, []string{"subject"}, false},
		{`session.id`, nil, false},
		{`string(session.input)`, nil, true},
		{`session.input.map(k, session.input[k]).join(",")`, nil, true},
		{`size(session) > 0`, nil, true},
		{`"constant"`, nil, false},
	}
	for _, c := range cases {
		program, err := env.Compile(c.src)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		fields, whole := program.Fields("session", "input")
		if strings.Join(fields, ",") != strings.Join(c.fields, ",") || whole != c.whole {
			t.Fatalf("%s: Fields = %v, %v; want %v, %v", c.src, fields, whole, c.fields, c.whole)
		}
	}
}

// The MCP endpoint evaluates the session id on every request (ACT-587).
func BenchmarkEvalSessionID(b *testing.B) {
	env := mustEnv(b, expr.Variables("execution", "session"))
	program, err := env.Compile(`string(size(session.input.principal)) + ':' + session.input.principal + ':' + session.input.subject`)
	if err != nil {
		b.Fatal(err)
	}
	vars := map[string]any{"session": map[string]any{"input": map[string]any{
		"principal": "org_2f1c9a", "subject": "user_81b3e",
	}}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := program.Eval(ctx, vars); err != nil {
			b.Fatal(err)
		}
	}
}

// VariablesOf declares each variable with its value's type, and
// JSONNumbers reads a JSON whole number as an int: decoded from JSON,
// {"x": 41} makes x + 1 the int 42, where a map-typed x had no overload.
func TestVariablesOfTakeTheirValuesTypes(t *testing.T) {
	var decoded map[string]any
	if err := json.Unmarshal([]byte(`{"x": 41, "half": 0.5, "s": "a", "l": [1, 2.5], "m": {"n": 3}, "none": null}`), &decoded); err != nil {
		t.Fatal(err)
	}
	vars := expr.JSONNumbers(decoded).(map[string]any)
	env := mustEnv(t, expr.VariablesOf(vars))
	cases := []struct {
		src  string
		want any
	}{
		{`x + 1`, int64(42)},
		{`half * 2.0`, 1.0},
		{`s + "b"`, "ab"},
		{`l[0] + 1`, int64(2)},
		{`m.n + 1`, int64(4)},
		{`none == null`, true},
	}
	for _, c := range cases {
		got, err := eval(t, env, c.src, vars)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		if !jsonEqual(got, c.want) {
			t.Errorf("%s = %#v, want %#v", c.src, got, c.want)
		}
	}
	if _, err := env.Compile(`x + "a"`); err == nil || !strings.Contains(err.Error(), "overload") {
		t.Errorf("an int plus a string must be refused when compiled: %v", err)
	}
	if _, err := expr.NewEnv(expr.Variables("x"), expr.VariablesOf(map[string]any{"x": 1})); err == nil {
		t.Error("a variable declared by both Variables and VariablesOf must be refused")
	}
}

// Integers reads as CEL ints exactly the whole numbers the schema types as
// integers, at any depth it describes; numbers stay doubles.
func TestIntegers(t *testing.T) {
	schema := map[string]any{"type": "object", "properties": map[string]any{
		"n":     map[string]any{"type": "integer"},
		"x":     map[string]any{"type": "number"},
		"maybe": map[string]any{"type": []any{"integer", "null"}},
		"ids":   map[string]any{"type": "array", "items": map[string]any{"type": "integer"}},
		"inner": map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "integer"}},
	}}
	in := map[string]any{"n": 21.0, "x": 2.0, "maybe": 3.0, "ids": []any{1.0, 2.0}, "inner": map[string]any{"a": 4.0}, "other": 5.0}
	got := expr.Integers(in, schema).(map[string]any)
	want := map[string]any{"n": int64(21), "x": 2.0, "maybe": int64(3), "ids": []any{int64(1), int64(2)}, "inner": map[string]any{"a": int64(4)}, "other": 5.0}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Integers: %#v, want %#v", got, want)
	}
	if in["n"] != 21.0 {
		t.Errorf("Integers changed its input: %#v", in)
	}
	if got := expr.Integers(21.5, map[string]any{"type": "integer"}); got != 21.5 {
		t.Errorf("a fraction typed integer became %#v", got)
	}
}
