package task

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/incustest"
)

// Status and Start are on isx mcp's hot path: every task_status, exec with
// background: true and list_instances pays for them. Run with
//
//	go test ./internal/isx/task -run '^$' -bench . -benchtime 50x
func BenchmarkTasksDebian(b *testing.B) {
	c := incustest.Project(b)
	e := setUp(b, c, incustest.Launch(b, c, incustest.Debian), modeSystemd)
	benchmarkTasks(b, e)

	// How long after a task ends does Wait return? The command prints the
	// time it ends (date +%N: Debian only), which Wait's return is compared
	// with; both clocks are the host kernel's.
	b.Run("Wait-wake", func(b *testing.B) {
		ctx := context.Background()
		var late time.Duration
		for b.Loop() {
			st := e.start(b, Spec{Kind: KindCommand, Command: Shell("sleep 0.2; date +%s%N")})
			res, err := Wait(ctx, e.c, e.inst, []string{st.ID}, time.Minute)
			woke := time.Now()
			if err != nil || res.Changed == nil {
				b.Fatalf("Wait: %+v, %v", res, err)
			}
			b.StopTimer()
			out, err := Result(ctx, e.c, e.inst, st.ID, 0)
			if err != nil {
				b.Fatal(err)
			}
			ns, err := strconv.ParseInt(strings.TrimSpace(string(out.Stdout)), 10, 64)
			if err != nil {
				b.Fatalf("the command printed %q", out.Stdout)
			}
			late += woke.Sub(time.Unix(0, ns))
			b.StartTimer()
		}
		b.ReportMetric(float64(late.Milliseconds())/float64(b.N), "ms-after-exit/op")
	})
}

func BenchmarkTasksBusyBox(b *testing.B) {
	c := incustest.Project(b)
	benchmarkTasks(b, setUp(b, c, incustest.Launch(b, c, incustest.BusyBox), modeProcess))
}

func benchmarkTasks(b *testing.B, e *testEnv) {
	ctx := context.Background()
	running := e.start(b, Spec{Kind: KindCommand, Command: Shell("sleep 600")})
	b.Run("Status", func(b *testing.B) {
		for b.Loop() {
			st, err := Status(ctx, e.c, e.inst, running.ID)
			if err != nil || st.State != StateRunning {
				b.Fatalf("Status: %+v, %v", st, err)
			}
		}
	})
	b.Run("Start", func(b *testing.B) {
		for b.Loop() {
			started, err := e.starter.Start(ctx, e.c, e.inst, Spec{Kind: KindCommand, Command: Shell("true")})
			if err != nil || started.Status.Mode != e.mode {
				b.Fatalf("Start: %+v, %v", started, err)
			}
		}
	})
	b.Run("Start-replay", func(b *testing.B) {
		spec := Spec{Kind: KindCommand, Command: Shell("true"), Key: "bench"}
		for b.Loop() {
			if _, err := e.starter.Start(ctx, e.c, e.inst, spec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Wait-ended", func(b *testing.B) {
		for b.Loop() {
			res, err := Wait(ctx, e.c, e.inst, []string{running.ID, "t-aaaaaaaaaa"}, time.Minute)
			if err != nil || res.Changed == nil {
				b.Fatalf("Wait: %+v, %v", res, err)
			}
		}
	})
	b.Run("List", func(b *testing.B) {
		for b.Loop() {
			if _, err := List(ctx, e.c, e.inst); err != nil {
				b.Fatal(err)
			}
		}
	})
}
