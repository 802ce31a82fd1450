package proxy_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"

	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/proxy"
	"github.com/incusspawn/isx/internal/isx/proxy/proxytest"
	"github.com/incusspawn/isx/internal/isx/template"
	"github.com/incusspawn/isx/internal/testkit"
)

func TestMain(m *testing.M) { incustest.Main(m, proxytest.RemoveClient) }

// Test templates with accounts, on top of the busybox and Debian chains.
const (
	busyboxAccounts = "tpl-proxy-busybox"
	debianAccounts  = "tpl-proxy-debian"
	busyboxNone     = "tpl-proxy-none"
	// busyboxRootRun keeps /run on the root disk: its init mounts
	// nothing there.
	busyboxRootRun = "tpl-proxy-rootrun"
)

var accountTemplates = map[string]string{
	busyboxAccounts + ".yaml": "name: " + busyboxAccounts + "\nparent: tpl-test-busybox\naccounts:\n  claude: work\n  openai: work\n  github: bot\n",
	debianAccounts + ".yaml":  "name: " + debianAccounts + "\nparent: tpl-test-debian\naccounts:\n  claude: work\n  github: bot\n",
	busyboxNone + ".yaml":     "name: " + busyboxNone + "\nparent: tpl-test-busybox\n",
	busyboxRootRun + ".yaml": "name: " + busyboxRootRun + "\nparent: tpl-test-busybox\naccounts:\n  claude: work\n" +
		"run:\n  - name: leave /run on the root disk\n    run: sed -i '/mount -t tmpfs/d' /etc/inittab\n",
}

// world is one test's: a throwaway Incus project with built templates, a
// home with accounts.yaml, a fake Anthropic API, and a proxy.
type world struct {
	t         testing.TB
	client    *incus.Client
	home      string
	set       *template.Set
	anthropic *proxytest.Anthropic
	apiKey    string
	token     string
	upstreams map[string]config.Upstream
	logs      *testkit.SyncBuffer
	server    *proxy.Server
	done      chan error
}

func newWorld(t testing.TB, templates ...string) *world {
	t.Helper()
	c := incustest.Project(t)
	w := &world{t: t, client: c, home: shortHome(t), apiKey: "sk-ant-api03-" + randomHex(t, 24), token: "ghp_" + randomHex(t, 18), logs: &testkit.SyncBuffer{}}
	w.set = buildtest.Templates(t, buildtest.Write(t, accountTemplates))
	buildtest.Build(t, c, w.set, templates...)
	a, err := proxytest.StartAnthropic()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	w.anthropic = a
	w.upstreams = map[string]config.Upstream{}
	w.upstream("api.anthropic.com", a.URL)
	w.writeAccounts(fmt.Sprintf("claude:\n  work:\n    api-key: %s\nopenai:\n  work:\n    api-key: %s-openai\ngithub:\n  bot:\n    token: %s\n", w.apiKey, w.apiKey, w.token), 0o600)
	return w
}

// shortHome is a home directory whose socket paths fit a socket address.
func shortHome(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "isxp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func randomHex(t testing.TB, n int) string {
	t.Helper()
	raw := make([]byte, n)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(raw)
}

func (w *world) upstream(host, base string) {
	w.t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		w.t.Fatal(err)
	}
	w.upstreams[host] = config.Upstream{Host: host, URL: u}
}

func (w *world) writeAccounts(content string, mode os.FileMode) {
	w.t.Helper()
	path := config.AccountsPath(w.home)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		w.t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	w.t.Cleanup(cancel)
	return ctx
}

func (w *world) options(clk clock.Clock) proxy.Options {
	owner, err := instance.CurrentOwner()
	if err != nil {
		w.t.Fatal(err)
	}
	return proxy.Options{
		Home: w.home, Client: w.client, Owner: owner, Upstreams: w.upstreams,
		Templates: func() (*template.Set, error) { return w.set, nil },
		Clock:     clk, Log: slog.New(slog.NewTextHandler(w.logs, nil)), Version: "test",
	}
}

// start runs a proxy in this process until the test ends or stop.
func (w *world) start(opts proxy.Options) *proxy.Server {
	w.t.Helper()
	s, err := proxy.New(opts)
	if err != nil {
		w.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	w.server, w.done = s, done
	c := proxy.Connect(w.home)
	incustest.WaitFor(w.t, "the proxy to answer", time.Minute, func() bool {
		_, err := c.Status(context.Background())
		return err == nil
	})
	w.t.Cleanup(w.stop)
	return s
}

func (w *world) stop() {
	if w.server == nil {
		return
	}
	w.server.Stop()
	if err := <-w.done; err != nil {
		w.t.Errorf("the proxy ended with %v\nlog:\n%s", err, w.logs.String())
	}
	w.server = nil
}

// branch makes an instance as isx branch does, and has the proxy admit it.
func (w *world) branch(name, from string, network instance.Network) {
	w.t.Helper()
	owner, err := instance.CurrentOwner()
	if err != nil {
		w.t.Fatal(err)
	}
	m := &instance.Manager{Client: w.client, Clock: clock.Real{}, ProxyDir: config.ProxyDir(w.home)}
	if err := m.Branch(w.ctx(), instance.BranchOptions{Name: name, From: from, Owner: owner, Network: network}); err != nil {
		w.t.Fatal(err)
	}
	if network == instance.NetworkAirgap || w.server == nil {
		return
	}
	if _, err := w.server.Admit(w.ctx(), name); err != nil {
		w.t.Fatalf("admitting %s: %v\nlog:\n%s", name, err, w.logs.String())
	}
	proxytest.PushClient(w.t, w.client, name)
}

// run runs a shell script in the instance as root with the proxy's
// environment (the profile a login shell reads).
func (w *world) run(name, script string) (string, int) {
	w.t.Helper()
	res, err := w.client.Exec(w.ctx(), name, incus.ExecRequest{
		Command: []string{"sh", "-c", ". " + instance.ProfileFile + " 2>/dev/null; " + script},
		Timeout: 4 * time.Minute,
	})
	if err != nil {
		w.t.Fatalf("exec in %s: %v", name, err)
	}
	return string(res.Stdout) + string(res.Stderr), res.ExitCode
}

func (w *world) mustRun(name, script string) string {
	w.t.Helper()
	out, code := w.run(name, script)
	if code != 0 {
		w.t.Fatalf("%s in %s: exit %d\n%s\nproxy log:\n%s", script, name, code, out, w.logs.String())
	}
	return out
}

func (w *world) secret(name string) string {
	w.t.Helper()
	data, err := w.client.PullFile(w.ctx(), name, instance.SecretFile)
	if err != nil {
		w.t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

func (w *world) activity(name string) proxy.Activity {
	w.t.Helper()
	a, err := proxy.Connect(w.home).Activity(context.Background(), name)
	if err != nil {
		w.t.Fatal(err)
	}
	return a
}

// hostRequest sends a request to the instance's socket from the host, as
// the instance's proxy device does: for what no tool in an instance does
// on purpose (a request larger than allowed, a client that vanishes).
func (w *world) hostClient(name string) *http.Client {
	socket := instance.ProxySocket(config.ProxyDir(w.home), w.client.ProjectName(), name)
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		DisableKeepAlives:     true,
		ExpectContinueTimeout: 10 * time.Second,
	}}
}

// messagesBody is a Messages request.
func messagesBody(stream bool) string {
	return fmt.Sprintf(`{"model":"claude-test","max_tokens":16,"stream":%t,"messages":[{"role":"user","content":"hi"}]}`, stream)
}

// waitActivity waits until the instance's activity satisfies ok.
func (w *world) waitActivity(name, what string, ok func(proxy.Activity) bool) proxy.Activity {
	w.t.Helper()
	var last proxy.Activity
	incustest.WaitFor(w.t, what, time.Minute, func() bool {
		last = w.activity(name)
		return ok(last)
	})
	return last
}

// waitActivityWhile is waitActivity for a call that runs in the
// background: if the call ends before the activity shows, the wait stops
// at once and fails with what the call printed, which is what a person
// needs to see, instead of a minute's silence.
func (w *world) waitActivityWhile(name, what string, running <-chan string, ok func(proxy.Activity) bool) proxy.Activity {
	w.t.Helper()
	var last proxy.Activity
	var ended *string
	incustest.WaitFor(w.t, what, time.Minute, func() bool {
		select {
		case out := <-running:
			ended = &out
			return true
		default:
		}
		last = w.activity(name)
		return ok(last)
	})
	if ended != nil {
		w.t.Fatalf("the call ended before %s; it printed: %s; activity then: %+v\nthe proxy's log:\n%s", what, *ended, w.activity(name), w.logs.String())
	}
	return last
}

func decodeJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("decoding %q: %v", s, err)
	}
}

func (w *world) proxyDir() string { return config.ProxyDir(w.home) }
