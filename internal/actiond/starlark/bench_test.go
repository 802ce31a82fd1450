package starlark

import (
	"context"
	"testing"
)

// The target: a trivial tool runs in well under 100 µs, conversion included.
func BenchmarkRunTrivialTool(b *testing.B) {
	script := Script{Name: "trivial.star", Source: `def run(event): return {"x": event["data"]["a"] + 1}`}
	event := map[string]any{"data": map[string]any{"a": float64(1)}}
	host := echoHost()
	ctx := context.Background()
	for b.Loop() {
		if _, err := Run(ctx, script, event, host, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

// A script making one tool call, with a cancellable context as the
// endpoint passes.
func BenchmarkRunToolCall(b *testing.B) {
	script := Script{Name: "call.star", Source: `def run(event):
    out = tools.echo({"id": event["data"]["id"], "n": 1})
    return {"got": out["id"]}
`}
	event := map[string]any{"data": map[string]any{"id": "a7f2c0d4"}}
	host := echoHost()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for b.Loop() {
		host.calls = host.calls[:0]
		if _, err := Run(ctx, script, event, host, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckCached(b *testing.B) {
	script := Script{Name: "check.star", Source: "QUERY = \"{ a }\"\ndef run(event):\n    return graphql(QUERY)\n"}
	for b.Loop() {
		if _, err := Check(script); err != nil {
			b.Fatal(err)
		}
	}
}

// Decimal arithmetic evaluates CEL's operators inside the script.
func BenchmarkRunDecimalArithmetic(b *testing.B) {
	script := Script{Name: "decimal.star", Source: `def run(event):
    total = decimal("0")
    for amount in event["data"]["amounts"]:
        total = total + decimal(amount)
    return {"total": total, "fee": money(total, "USD") * 2}
`}
	event := map[string]any{"data": map[string]any{"amounts": []any{"10.50", "0.25", "3"}}}
	host := echoHost()
	for b.Loop() {
		if _, err := Run(context.Background(), script, event, host, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

// A loop of the operations the memory budget measures (concatenation,
// comparison, indexing by a variable, a method that builds) beside plain
// arithmetic, which it leaves alone.
func BenchmarkRunMeasuredLoop(b *testing.B) {
	script := Script{Name: "loop.star", Source: `def run(event):
    rows = event["data"]["rows"]
    total = 0
    names = []
    for i in range(len(rows)):
        row = rows[i]
        if row["kind"] == event["data"]["kind"]:
            total += row["amount"] * 2
            names.append(row["name"].upper() + ":" + str(i))
    return {"total": total, "names": ",".join(names)}
`}
	rows := make([]any, 200)
	for i := range rows {
		rows[i] = map[string]any{"kind": []string{"a", "b"}[i%2], "amount": float64(i), "name": "row"}
	}
	event := map[string]any{"data": map[string]any{"rows": rows, "kind": "a"}}
	host := echoHost()
	for b.Loop() {
		if _, err := Run(context.Background(), script, event, host, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}
