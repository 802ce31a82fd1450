package proxy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/proxy"
)

// A watcher of the activity (the TUI's mission control) is told of a model
// call when it happens: the stream sends the counts at once, then again
// after the change, without the watcher asking again.
func TestWatchStreamsChangesISX187(t *testing.T) {
	w := newWorld(t, busyboxAccounts)
	w.start(w.options(clock.Real{}))
	w.branch("one", busyboxAccounts, instance.NetworkProxyOnly)
	ctx, cancel := context.WithTimeout(w.ctx(), time.Minute)
	defer cancel()
	reports, err := proxy.Connect(w.home).Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	requestsOf := func(r proxy.Report) (int64, bool) {
		for _, a := range r.Instances {
			if a.Instance == "one" && a.Known() {
				return a.Requests, true
			}
		}
		return 0, false
	}
	first, ok := <-reports
	if n, known := requestsOf(first); !ok || !known || n != 0 {
		t.Fatalf("the first report: %+v", first)
	}
	if out := w.mustRun("one", routeCall(w.secret("one"))); !strings.Contains(out, "status=200") {
		t.Fatalf("the model call: %s", out)
	}
	for report := range reports {
		if n, _ := requestsOf(report); n == 1 {
			cancel()
			for range reports {
			}
			return
		}
	}
	t.Fatal("the stream ended without reporting the model call")
}
