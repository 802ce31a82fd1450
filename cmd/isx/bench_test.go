package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/proxy/proxytest"
	"github.com/incusspawn/isx/internal/testkit"
)

func benchContext(b *testing.B) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	b.Cleanup(cancel)
	return ctx
}

// BenchmarkBranch: `isx branch` of a built Debian template (the binary,
// as a person runs it) against the raw `incus copy` + `incus start` of the
// same template, side by side on the btrfs pool. Each iteration's instance
// is deleted outside the timer. Target: isx at most 1.2 times incus.
func BenchmarkBranch(b *testing.B) {
	c := incustest.Project(b)
	ctx := benchContext(b)
	x := newCLI(b, c)
	buildtest.Build(b, c, buildtest.Templates(b), buildtest.Debian)
	incusCLI, err := exec.LookPath("incus")
	if err != nil {
		b.Fatal(err)
	}
	remove := func(name string) {
		if err := c.DeleteInstance(ctx, name, true); err != nil {
			b.Fatal(err)
		}
	}
	medians := map[string]time.Duration{}
	b.Run("isx", func(b *testing.B) {
		var d testkit.Durations
		b.StopTimer()
		for i := 0; i < b.N; i++ {
			name := fmt.Sprintf("isx-%d", i)
			d.Timed(b, func() { x.ok("branch", name, "--from", buildtest.Debian) })
			remove(name)
		}
		d.Report(b)
		medians["isx"] = d.Median()
	})
	// incusSteps times the incus commands steps gives for each
	// iteration's instance, and keeps their median under key.
	incusSteps := func(key, prefix string, steps func(name string) [][]string) func(*testing.B) {
		return func(b *testing.B) {
			var d testkit.Durations
			b.StopTimer()
			for i := 0; i < b.N; i++ {
				name := fmt.Sprintf("%s-%d", prefix, i)
				d.Timed(b, func() {
					for _, args := range steps(name) {
						if out, err := exec.CommandContext(ctx, incusCLI, args...).CombinedOutput(); err != nil {
							b.Fatalf("incus %v: %v\n%s", args, err, out)
						}
					}
				})
				remove(name)
			}
			d.Report(b)
			medians[key] = d.Median()
		}
	}
	b.Run("incus-copy-start", incusSteps("incus", "incus", func(name string) [][]string {
		return [][]string{
			{"copy", "--project", c.ProjectName(), buildtest.Debian, name},
			{"start", "--project", c.ProjectName(), name},
		}
	}))
	// The same copy and start with the proxy device isx gives every
	// instance that has a network: Incus waits for a proxy device's
	// forkproxy by polling its log once a second, which is most of what
	// isx adds.
	socket := filepath.Join(b.TempDir(), "proxy.sock")
	b.Run("incus-copy-device-start", incusSteps("incus-device", "incusdev", func(name string) [][]string {
		return [][]string{
			{"copy", "--project", c.ProjectName(), buildtest.Debian, name},
			{"config", "device", "add", "--project", c.ProjectName(), name, instance.ProxyDevice, "proxy",
				"listen=tcp:" + instance.ProxyAddress, "connect=unix:" + socket, "bind=container"},
			{"start", "--project", c.ProjectName(), name},
		}
	}))
	if medians["incus"] > 0 && medians["isx"] > 0 {
		b.Logf("isx branch median %s, incus copy+start median %s: ratio %.2f (target at most 1.2); with isx's proxy device %s: ratio %.2f",
			medians["isx"], medians["incus"], float64(medians["isx"])/float64(medians["incus"]),
			medians["incus-device"], float64(medians["isx"])/float64(medians["incus-device"]))
	}
}

// BenchmarkList/50-instances times the isx binary's `isx list` (process
// start, config, templates, one Incus request, the table) over 50 stopped
// busybox instances, some with MCP stamps so the MCP column is drawn.
// BenchmarkList/50-instances-wide and -json time `isx list -o wide` and
// `--json`, which ask Incus for every instance's state, side by side with
// the plain table. BenchmarkListing/50-instances times the listing
// function alone.
func BenchmarkList(b *testing.B) {
	_, x := fiftyInstances(b)
	for _, run := range []struct {
		name string
		args []string
	}{
		{"50-instances", []string{"list"}},
		{"50-instances-wide", []string{"list", "-o", "wide"}},
		{"50-instances-json", []string{"list", "--json"}},
	} {
		b.Run(run.name, func(b *testing.B) {
			var d testkit.Durations
			b.StopTimer()
			for i := 0; i < b.N; i++ {
				d.Timed(b, func() { x.ok(run.args...) })
			}
			d.Report(b)
		})
	}
}

func BenchmarkListing(b *testing.B) {
	c, _ := fiftyInstances(b)
	set := buildtest.Templates(b)
	ctx := benchContext(b)
	b.Run("50-instances", func(b *testing.B) {
		var d testkit.Durations
		b.StopTimer()
		for i := 0; i < b.N; i++ {
			d.Timed(b, func() {
				l, err := collectListing(ctx, c, set)
				if err != nil || len(l.instances) != 50 {
					b.Fatalf("listing: %v", err)
				}
			})
		}
		d.Report(b)
	})
}

func fiftyInstances(b *testing.B) (*incus.Client, *cli) {
	c := incustest.Project(b)
	ctx := benchContext(b)
	x := newCLI(b, c)
	buildtest.Build(b, c, buildtest.Templates(b), buildtest.BusyBox)
	m := instance.NewManager(c)
	for i := range 50 {
		opts := instance.BranchOptions{Name: fmt.Sprintf("w%02d", i), From: buildtest.BusyBox, Owner: "bench", NoStart: true}
		if i%5 == 0 {
			opts.Config = map[string]string{instance.KeyMCPSession: "s", instance.KeyMCPPurpose: fmt.Sprintf("task %d", i)}
		}
		if err := m.Branch(ctx, opts); err != nil {
			b.Fatal(err)
		}
	}
	return c, x
}

// BenchmarkCoordinatorToolCall: one tools/call (list_instances) from
// inside a coordinator instance, through mcp.isx.internal (the proxy,
// TLS, the secret and grant checks, the coordinator's host isx mcp over
// Streamable HTTP), side by side with the same call from a host stdio
// session of isx mcp. The difference of the medians is the latency the
// coordinator's path adds. 50 calls on one connection per iteration.
func BenchmarkCoordinatorToolCall(b *testing.B) {
	w := newProxyWorld(b)
	if err := os.WriteFile(config.MCPPath(w.home), []byte("templates: ["+proxyTemplate+"]\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	w.ok("branch", "coord", "--from", proxyTemplate, "--proxy-only", "--mcp-client")
	proxytest.PushClient(b, w.client, "coord")
	const calls = 50
	b.Run("coordinator", func(b *testing.B) {
		var medians []time.Duration
		for b.Loop() {
			out := w.inside("coord", fmt.Sprintf("%s mcp -secret-file %s bench %d list_instances '{}'", proxytest.ClientPath, instance.SecretFile, calls))
			var n int
			var median, mean int64
			if _, err := fmt.Sscanf(strings.TrimSpace(out), "calls=%d median_ns=%d mean_ns=%d", &n, &median, &mean); err != nil {
				b.Fatalf("%v: %s", err, out)
			}
			medians = append(medians, time.Duration(median))
		}
		b.ReportMetric(float64(testkit.Durations(medians).Median().Microseconds())/1000, "call-median-ms")
	})
	b.Run("host-stdio-baseline", func(b *testing.B) {
		ctx := benchContext(b)
		c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "test"}, nil)
		session, err := c.Connect(ctx, &mcp.CommandTransport{Command: w.command(ctx, "mcp")}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer session.Close()
		var took testkit.Durations
		for b.Loop() {
			for range calls {
				began := time.Now()
				res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "list_instances", Arguments: map[string]any{}})
				if err != nil || res.IsError {
					b.Fatalf("list_instances: %v %+v", err, res)
				}
				took = append(took, time.Since(began))
			}
		}
		b.ReportMetric(float64(took.Median().Microseconds())/1000, "call-median-ms")
	})
}
