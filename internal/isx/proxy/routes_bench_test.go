package proxy_test

import (
	"fmt"
	"github.com/incusspawn/isx/internal/testkit"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/proxy/proxytest"
)

// BenchmarkHostRoute: requests per second to a host route from inside an
// instance, through the proxy (TLS to the proxy, every check, the secret
// file looked at, forwarded over plain HTTP), side by side with the
// baseline of the same GETs sent on the host straight to the controller.
// 4000 requests, 8 at a time, per iteration.
func BenchmarkHostRoute(b *testing.B) {
	w := newRouteWorld(b)
	w.branch("agent", busyboxAccounts, instance.NetworkProxyOnly)
	const n, c = 4000, 8
	b.Run("through-proxy", func(b *testing.B) {
		var rps []float64
		for b.Loop() {
			out := w.mustRun("agent", fmt.Sprintf("%s load -url https://work.isx.internal/ping -n %d -c %d %s", proxytest.ClientPath, n, c, withSecret))
			rps = append(rps, field(b, out, "rps="))
		}
		b.ReportMetric(testkit.Median(rps), "req/s")
	})
	b.Run("direct-baseline", func(b *testing.B) {
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: c}}
		var rps []float64
		for b.Loop() {
			began := time.Now()
			var wg sync.WaitGroup
			jobs := make(chan struct{}, n)
			for range n {
				jobs <- struct{}{}
			}
			close(jobs)
			for range c {
				wg.Go(func() {
					for range jobs {
						resp, err := client.Get("http://" + w.work.addr + "/ping")
						if err != nil {
							b.Error(err)
							return
						}
						io.Copy(io.Discard, resp.Body) //nolint:errcheck // the status is what counts
						resp.Body.Close()
					}
				})
			}
			wg.Wait()
			rps = append(rps, float64(n)/time.Since(began).Seconds())
		}
		b.ReportMetric(testkit.Median(rps), "req/s")
	})
}

func field(b *testing.B, out, name string) float64 {
	b.Helper()
	i := strings.Index(out, name)
	if i < 0 {
		b.Fatalf("no %s in %s", name, out)
	}
	v, err := strconv.ParseFloat(strings.Fields(out[i+len(name):])[0], 64)
	if err != nil {
		b.Fatal(err)
	}
	return v
}
