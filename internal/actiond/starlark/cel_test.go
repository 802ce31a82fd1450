package starlark

import (
	"reflect"
	"strings"
	"testing"
)

// ACT-329: CEL's pure functions are builtins that run inside the script, with
// CEL's meaning (internal/actiond/expr) and no cel call, even when the host offers no
// cel.
func TestPureBuiltinsACT329(t *testing.T) {
	host := echoHost()
	host.natives = map[string]bool{}
	out := mustRun(t, host, `def run(event):
    price = decimal("10.50")
    total = price * decimal(3) - decimal("0.25")
    fee = money("5", "USD")
    due = fee * 2 + money(total, "USD")
    tools.echo({"due": due, "total": total, "on": date("2024-01-31")})
    return {
        "total": total,
        "str": str(total),
        "type": [type(total), type(fee), type(date("2024-01-31"))],
        "quotient": decimal("10.00") / decimal(4),
        "negated": -price,
        "rounded": decimal("2.345").round(2),
        "due": due,
        "amount": due.amount(),
        "currency": due.currency(),
        "compare": [price == decimal("10.5"), price < total, fee != money("5.00", "USD"), date("2024-01-31") < date("2024-02-01")],
        "key": {price: "found"}[decimal("10.5")],
        "uuid": uuid("A7F2C0D4-0000-4000-8000-000000000000"),
        "falsy": [bool(decimal("0.00")), bool(price)],
    }
`, nil)
	want := map[string]any{
		"total":    "31.25",
		"str":      "31.25",
		"type":     []any{"decimal", "money", "date"},
		"quotient": "2.50",
		"negated":  "-10.50",
		"rounded":  "2.34",
		"due":      map[string]any{"amount": "41.25", "currency": "USD"},
		"amount":   "41.25",
		"currency": "USD",
		"compare":  []any{true, true, false, true},
		"key":      "found",
		"uuid":     "a7f2c0d4-0000-4000-8000-000000000000",
		"falsy":    []any{false, true},
	}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("got  %#v\nwant %#v", out, want)
	}
	// A tool gets each value's JSON form; no cel call was made.
	if !reflect.DeepEqual(host.calls, []string{"tools.echo"}) {
		t.Fatalf("calls %v", host.calls)
	}
}

// What CEL refuses, the builtins refuse, with CEL's message on the script's
// line.
func TestPureBuiltinErrors(t *testing.T) {
	for _, tc := range []struct{ expression, want string }{
		{`decimal("ten")`, "program.star:2:19: in run\nError in decimal: not a decimal number: \"ten\""},
		{`decimal("1") + 1`, "found no matching overload for '_+_' applied to '(decimal, int)'"},
		{`decimal(1.5)`, "found no matching overload for 'decimal' applied to '(double)'"},
		{`money("1", "USD") + money("1", "EUR")`, "money: cannot combine USD with EUR"},
		{`money("1", "usd")`, "is not an ISO 4217 code"},
		{`date("31/01/2024")`, "is not a date written YYYY-MM-DD"},
		{`uuid("nope")`, `uuid: "nope" is not a UUID`},
		{`decimal("1") / decimal(0)`, "decimal: division by zero"},
		{`decimal([1])`, "argument 1: a list is not a CEL value"},
	} {
		_, err := runScript(t, echoHost(), "def run(event):\n    return "+tc.expression+"\n", nil)
		e := scriptError(t, err)
		if e.Code != CodeActionFailure || !strings.Contains(e.Message, tc.want) {
			t.Errorf("%s: got %q", tc.expression, e.Message)
		}
	}
}

// ACT-330: functions that read the clock or randomness are not builtins;
// the error points at cel(), through which they run as a recorded call.
func TestImpureFunctionsACT330(t *testing.T) {
	for _, call := range []string{"uuid.New()", "time.Now()"} {
		_, err := runScript(t, echoHost(), "def run(event):\n    return "+call+"\n", nil)
		e := scriptError(t, err)
		if e.Code != CodeActionFailure || !strings.Contains(e.Message, `call cel("`+call+`") instead`) {
			t.Fatalf("%s: got %q", call, e.Message)
		}
	}
	host := echoHost()
	out := mustRun(t, host, "def run(event):\n    return cel(\"uuid.New()\")\n", nil)
	if out.(map[string]any)["expression"] != "uuid.New()" || !reflect.DeepEqual(host.calls, []string{"cel"}) {
		t.Fatalf("got %v, calls %v", out, host.calls)
	}
}
