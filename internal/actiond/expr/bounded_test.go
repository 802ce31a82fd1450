package expr_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/actiond/expr"
)

// The unit beside server's TestCELCannotExhaustMemory: replace, join and
// format whose answer would pass MaxBuiltBytes are refused from their
// arguments, before they build it; smaller ones answer as before.
func TestBuiltStringsAreBounded(t *testing.T) {
	env := expr.MustNewEnv(expr.Variables("v"))
	vars := map[string]any{"v": map[string]any{"s": strings.Repeat("x", 20000), "l": make([]any, 300), "big": strings.Repeat("y", 1<<20), "mid": strings.Repeat("z", 20000), "short": strings.Repeat("x", 2000)}}
	for _, src := range []string{
		`v.s.replace("", v.s).size()`,
		`v.short.replace("x", v.mid).size()`,
		`v.l.map(x, v.big).join(",").size()`,
		`"%s %s".format([v.l.map(x, v.big), v.big]).size()`,
	} {
		p, err := env.Compile(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err = p.Eval(context.Background(), vars)
		runtime.ReadMemStats(&after)
		var e *expr.Error
		if !errors.As(err, &e) || !errors.Is(err, expr.ErrBuildLimit) || !strings.Contains(e.Message, "past the limit") {
			t.Errorf("%s: %v, want the build limit", src, err)
		}
		if grown := after.TotalAlloc - before.TotalAlloc; grown > 4*expr.MaxBuiltBytes {
			t.Errorf("%s: allocated %d MiB before it was refused", src, grown>>20)
		}
	}
	for src, want := range map[string]any{
		`v.s.replace("x", "yy").size()`:    int64(40000),
		`["a", "b", "c"].join("-")`:        "a-b-c",
		`"%s has %d".format(["ann", 3])`:   "ann has 3",
		`v.l.map(x, "ab").join("").size()`: int64(600),
	} {
		p, err := env.Compile(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if got, err := p.Eval(context.Background(), vars); err != nil || got != want {
			t.Errorf("%s = %v %v, want %v", src, got, err, want)
		}
	}
}
