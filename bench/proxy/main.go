// Command proxy measures the isx host proxy against the same fake
// Anthropic upstream reached directly, side by side in one run: the
// median latency the proxy adds to a small model call, the time to the
// first byte of a streamed one, small requests per second, and the
// proxy's resident memory idle and under 64 open streams.
//
// It runs the real proxy (`isx proxy serve`, built from this tree unless
// -isx names a binary) for a real instance in a throwaway Incus project,
// and sends its requests to that instance's proxy socket from the host,
// as the instance's Incus proxy device delivers them: what is measured is
// the proxy's own work, the device's hop being the same either way.
//
//	go run ./bench/proxy [-n 2000] [-streams 300] [-c 32] [-d 10s]
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"

	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/proxy"
	"github.com/incusspawn/isx/internal/isx/proxy/proxytest"
	"github.com/incusspawn/isx/internal/sourcetree"
)

func main() {
	isx := flag.String("isx", "", "the isx binary (default: built from this tree)")
	n := flag.Int("n", 2000, "small calls each way, for the latency")
	streams := flag.Int("streams", 300, "streamed calls each way, for the time to first byte")
	clients := flag.Int("c", 32, "concurrent clients, for requests per second")
	duration := flag.Duration("d", 10*time.Second, "how long to measure requests per second each way")
	flag.Parse()
	if err := run(*isx, *n, *streams, *clients, *duration); err != nil {
		fmt.Fprintln(os.Stderr, "bench/proxy:", err)
		os.Exit(1)
	}
}

type bench struct {
	client    *incus.Client
	base      *incus.Client
	project   string
	home      string
	anthropic *proxytest.Anthropic
	hold      atomic.Pointer[chan struct{}]
	direct    *http.Client
	proxied   *http.Client
	secret    string
	pid       int
}

func run(isx string, n, streams, clients int, duration time.Duration) error {
	b := &bench{}
	defer b.cleanUp()
	if err := b.setUp(isx); err != nil {
		return err
	}
	idle, err := b.rss()
	if err != nil {
		return err
	}
	fmt.Printf("isx host proxy benchmark: %d small calls and %d streams each way, %d clients for %s each way, GOMAXPROCS of the proxy = its default on %d cores\n\n",
		n, streams, clients, duration, numCPU())
	direct, proxied, err := b.latency(n)
	if err != nil {
		return err
	}
	fmt.Printf("%-36s %12s %12s %12s\n", "", "direct", "proxied", "added")
	fmt.Printf("%-36s %12s %12s %12s\n", "small call, median", ms(median(direct)), ms(median(proxied)), ms(median(proxied)-median(direct)))
	fmt.Printf("%-36s %12s %12s %12s\n", "small call, p99", ms(percentile(direct, 0.99)), ms(percentile(proxied, 0.99)), ms(percentile(proxied, 0.99)-percentile(direct, 0.99)))
	directFirst, proxiedFirst, err := b.firstByte(streams)
	if err != nil {
		return err
	}
	fmt.Printf("%-36s %12s %12s %12s\n", "stream, time to first byte, median", ms(median(directFirst)), ms(median(proxiedFirst)), ms(median(proxiedFirst)-median(directFirst)))
	directRPS, err := throughput(b.direct, "", clients, duration)
	if err != nil {
		return err
	}
	proxiedRPS, err := throughput(b.proxied, b.secret, clients, duration)
	if err != nil {
		return err
	}
	fmt.Printf("%-36s %12.0f %12.0f %11.0f%%\n", "small calls per second", directRPS, proxiedRPS, 100*(proxiedRPS/directRPS-1))
	open, err := b.openStreams(64)
	if err != nil {
		return err
	}
	fmt.Printf("\n%-36s %12s\n", "proxy resident memory, idle", mib(idle))
	fmt.Printf("%-36s %12s\n", "proxy resident memory, 64 streams", mib(open))
	fmt.Printf("%-36s %12s\n", "(the older release's proxy, idle)", "about 82 MiB")
	return nil
}

func numCPU() int {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return 0
	}
	return strings.Count(string(data), "\nprocessor") + 1
}

func (b *bench) setUp(isx string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if isx == "" {
		built, err := buildISX()
		if err != nil {
			return err
		}
		isx = built
	}
	a, err := proxytest.StartAnthropic()
	if err != nil {
		return err
	}
	a.Forget = true
	a.Reply = func(n int, _ proxytest.Call) proxytest.Reply {
		r := proxytest.Reply{Usage: proxytest.DefaultUsage(0)}
		if hold := b.hold.Load(); hold != nil {
			r.Hold = *hold
		}
		return r
	}
	b.anthropic = a
	if err := b.makeInstance(ctx); err != nil {
		return err
	}
	cmd := exec.Command(isx, "proxy", "start")
	cmd.Env = append(os.Environ(), "HOME="+b.home, "ISX_PROJECT="+b.project)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("isx proxy start: %v: %s", err, out)
	}
	control := proxy.Connect(b.home)
	status, err := control.Status(ctx)
	if err != nil {
		return err
	}
	b.pid = status.PID
	if _, err := control.Admit(ctx, "bench"); err != nil {
		return err
	}
	secret, err := b.client.PullFile(ctx, "bench", instance.SecretFile)
	if err != nil {
		return err
	}
	b.secret = strings.TrimSpace(string(secret))
	socket := instance.ProxySocket(config.ProxyDir(b.home), b.project, "bench")
	b.proxied = &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		},
		MaxIdleConnsPerHost: 256,
	}}
	b.direct = &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", a.URL[len("http://"):])
		},
		MaxIdleConnsPerHost: 256,
	}}
	return nil
}

func buildISX() (string, error) {
	root, err := sourcetree.Root()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "isx-bench-")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "isx")
	cmd := exec.Command("go", "build", "-o", path, "./cmd/isx")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building isx: %v: %s", err, out)
	}
	return path, nil
}

// makeInstance makes a throwaway project with a template instance and
// one instance branched from it, as isx would.
func (b *bench) makeInstance(ctx context.Context) error {
	raw := make([]byte, 4)
	if _, err := rand.Read(raw); err != nil {
		return err
	}
	b.project = "isxbench-" + hex.EncodeToString(raw)
	b.base = incus.New("")
	err := b.base.CreateProject(ctx, incus.Project{Name: b.project, Description: "isx proxy benchmark", Config: map[string]string{
		"features.images": "false", "features.profiles": "false", "features.storage.volumes": "false", "features.networks": "false",
	}})
	if err != nil {
		return err
	}
	b.client = b.base.InProject(b.project)
	if b.home, err = os.MkdirTemp("", "isxb-"); err != nil {
		return err
	}
	dir := filepath.Join(b.home, "templates")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tpl-bench.yaml"), []byte("name: tpl-bench\nimage: isx/busybox\naccounts: {claude: bench}\n"), 0o644); err != nil {
		return err
	}
	if err := os.MkdirAll(config.Dir(b.home), 0o700); err != nil {
		return err
	}
	cfg := fmt.Sprintf("template-paths: [%s]\nproxy:\n  upstreams:\n    api.anthropic.com: %s\n", dir, b.anthropic.URL)
	if err := os.WriteFile(config.ConfigPath(b.home), []byte(cfg), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(config.AccountsPath(b.home), []byte("claude:\n  bench: {api-key: sk-ant-api03-bench}\n"), 0o600); err != nil {
		return err
	}
	owner, err := instance.CurrentOwner()
	if err != nil {
		return err
	}
	err = b.client.CreateInstance(ctx, incus.InstanceCreate{Name: "tpl-bench", Source: incus.ImageSource("isx/busybox"),
		Config: map[string]string{instance.KeyType: instance.TypeBase, instance.KeyTemplate: "tpl-bench", instance.KeySource: "user", instance.KeyOwner: owner}})
	if err != nil {
		return fmt.Errorf("making the template instance (is the isx/busybox image there? scripts/images.sh busybox): %w", err)
	}
	m := &instance.Manager{Client: b.client, Clock: clock.Real{}, ProxyDir: config.ProxyDir(b.home)}
	return m.Branch(ctx, instance.BranchOptions{Name: "bench", From: "tpl-bench", Owner: owner, Network: instance.NetworkProxyOnly})
}

func (b *bench) cleanUp() {
	if b.home != "" {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := proxy.StopAndWait(ctx, b.home, nil); err != nil && !proxy.IsNotRunning(err) {
			fmt.Fprintln(os.Stderr, "bench/proxy: stopping the proxy:", err)
		}
		cancel()
	}
	if b.anthropic != nil {
		b.anthropic.Close()
	}
	if b.client != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for _, name := range []string{"bench", "tpl-bench"} {
			if err := b.client.DeleteInstance(ctx, name, true); err != nil && !errors.Is(err, incus.ErrNotFound) {
				fmt.Fprintln(os.Stderr, "bench/proxy:", err)
			}
		}
		if err := b.base.DeleteProject(ctx, b.project); err != nil {
			fmt.Fprintln(os.Stderr, "bench/proxy:", err)
		}
	}
	if b.home != "" {
		os.RemoveAll(b.home)
	}
}

const smallCall = `{"model":"claude-test","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
const streamedCall = `{"model":"claude-test","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"hi"}]}`

// request is a model call: to the fake itself, or to the proxy's route
// with the instance secret as the key.
func request(ctx context.Context, secret, body string) (*http.Request, error) {
	target := "http://fake/v1/messages"
	if secret != "" {
		target = "http://isx-proxy" + proxy.AnthropicRoute + "/v1/messages"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", secret)
	return req, nil
}

func call(c *http.Client, secret, body string) error {
	req, err := request(context.Background(), secret, body)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s", resp.Status)
	}
	return nil
}

// latency times n small calls each way, alternating, after a warm-up.
func (b *bench) latency(n int) (direct, proxied []time.Duration, err error) {
	for range 200 {
		if err := errors.Join(call(b.direct, "", smallCall), call(b.proxied, b.secret, smallCall)); err != nil {
			return nil, nil, err
		}
	}
	for range n {
		for _, way := range []struct {
			c      *http.Client
			secret string
			into   *[]time.Duration
		}{{b.direct, "", &direct}, {b.proxied, b.secret, &proxied}} {
			start := time.Now()
			if err := call(way.c, way.secret, smallCall); err != nil {
				return nil, nil, err
			}
			*way.into = append(*way.into, time.Since(start))
		}
	}
	return direct, proxied, nil
}

// firstByte times, each way, from sending a streamed call to its first
// byte.
func (b *bench) firstByte(n int) (direct, proxied []time.Duration, err error) {
	first := func(c *http.Client, secret string) (time.Duration, error) {
		req, err := request(context.Background(), secret, streamedCall)
		if err != nil {
			return 0, err
		}
		start := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		one := make([]byte, 1)
		if _, err := io.ReadFull(resp.Body, one); err != nil {
			return 0, err
		}
		took := time.Since(start)
		_, err = io.Copy(io.Discard, resp.Body)
		return took, err
	}
	for range n {
		d, err := first(b.direct, "")
		if err != nil {
			return nil, nil, err
		}
		p, err := first(b.proxied, b.secret)
		if err != nil {
			return nil, nil, err
		}
		direct, proxied = append(direct, d), append(proxied, p)
	}
	return direct, proxied, nil
}

// throughput is small calls per second from clients at once.
func throughput(c *http.Client, secret string, clients int, d time.Duration) (float64, error) {
	var done atomic.Int64
	var failed atomic.Pointer[error]
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for time.Now().Before(stop) {
				if err := call(c, secret, smallCall); err != nil {
					failed.Store(&err)
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		return 0, *err
	}
	return float64(done.Load()) / d.Seconds(), nil
}

// openStreams holds n streamed calls open through the proxy and reads the
// proxy's resident memory while they are.
func (b *bench) openStreams(n int) (int64, error) {
	hold := make(chan struct{})
	b.hold.Store(&hold)
	defer b.hold.Store(nil)
	var wg sync.WaitGroup
	opened := make(chan error, n)
	for range n {
		wg.Go(func() {
			req, err := request(context.Background(), b.secret, streamedCall)
			if err != nil {
				opened <- err
				return
			}
			resp, err := b.proxied.Do(req)
			if err != nil {
				opened <- err
				return
			}
			defer resp.Body.Close()
			reader := bufio.NewReader(resp.Body)
			_, err = reader.ReadString('\n')
			opened <- err
			io.Copy(io.Discard, reader) //nolint:errcheck // ends when the fake lets go
		})
	}
	for range n {
		if err := <-opened; err != nil {
			close(hold)
			wg.Wait()
			return 0, err
		}
	}
	a, err := proxy.Connect(b.home).Activity(context.Background(), "bench")
	if err == nil && a.RequestsInFlight != int64(n) {
		err = fmt.Errorf("%d streams in flight, want %d", a.RequestsInFlight, n)
	}
	rss, rssErr := b.rss()
	close(hold)
	wg.Wait()
	return rss, errors.Join(err, rssErr)
}

// rss is the proxy's resident memory in bytes.
func (b *bench) rss() (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", b.pid))
	if err != nil {
		return 0, err
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(string(rest)), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS")
}

func median(d []time.Duration) time.Duration { return percentile(d, 0.5) }

func percentile(d []time.Duration, p float64) time.Duration {
	sorted := append([]time.Duration(nil), d...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(int(p*float64(len(sorted))), len(sorted)-1)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond)) }

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
