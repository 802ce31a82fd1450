package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/proxy"
	"github.com/incusspawn/isx/internal/isx/proxy/proxytest"
)

const proxyTemplate = "tpl-cli-proxy"

// proxyWorld is a CLI home whose config.yaml sends api.anthropic.com to a
// fake, with accounts.yaml and a template naming its account.
type proxyWorld struct {
	*cli
	client    *incus.Client
	anthropic *proxytest.Anthropic
	apiKey    string
}

func newProxyWorld(t testing.TB) *proxyWorld {
	t.Helper()
	c := incustest.Project(t)
	incustest.EnsureImages(t, incustest.BusyBox)
	x := newCLI(t, c)
	a, err := proxytest.StartAnthropic()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	w := &proxyWorld{cli: x, client: c, anthropic: a, apiKey: fmt.Sprintf("sk-ant-api03-cli-%d", time.Now().UnixNano())}
	dir := t.TempDir()
	tpl := "name: " + proxyTemplate + "\nparent: tpl-test-busybox\naccounts: {claude: work}\n"
	if err := os.WriteFile(filepath.Join(dir, proxyTemplate+".yaml"), []byte(tpl), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(x.home)
	if err != nil {
		t.Fatal(err)
	}
	cfg.TemplatePaths = append(cfg.TemplatePaths, dir)
	if err := config.Save(x.home, cfg); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(config.ConfigPath(x.home), os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "proxy:\n  upstreams:\n    api.anthropic.com: %s\n", a.URL)
	f.Close()
	w.writeAccounts(0o600)
	x.ok("build", proxyTemplate)
	return w
}

func (w *proxyWorld) writeAccounts(mode os.FileMode) {
	w.t.Helper()
	path := config.AccountsPath(w.home)
	if err := os.WriteFile(path, []byte("claude:\n  work: {api-key: "+w.apiKey+"}\n"), mode); err != nil {
		w.t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		w.t.Fatal(err)
	}
}

// inside runs a script in the instance with the proxy's environment.
func (w *proxyWorld) inside(name, script string) string {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := w.client.Exec(ctx, name, incus.ExecRequest{Command: []string{"sh", "-c", ". " + instance.ProfileFile + "; " + script}, Timeout: time.Minute})
	if err != nil {
		w.t.Fatal(err)
	}
	if res.ExitCode != 0 {
		w.t.Fatalf("%s in %s: exit %d: %s%s", script, name, res.ExitCode, res.Stdout, res.Stderr)
	}
	return string(res.Stdout)
}

func modelCall(stream bool) string {
	call := proxytest.ClientPath + " messages -url " + proxy.AnthropicBaseURL + "/v1/messages -key-file " + instance.SecretFile
	if stream {
		call += " -stream"
	}
	return call
}

func (w *proxyWorld) report() proxy.Report {
	w.t.Helper()
	var r proxy.Report
	if err := json.Unmarshal([]byte(w.ok("proxy", "activity", "--json").stdout), &r); err != nil {
		w.t.Fatal(err)
	}
	return r
}

func activityOf(r proxy.Report, name string) (proxy.Activity, bool) {
	for _, a := range r.Instances {
		if a.Instance == name {
			return a, true
		}
	}
	return proxy.Unknown(name), false
}

// isx branch starts the proxy when it does not run; isx proxy status,
// activity (a table and --json), restart and stop manage it. A restart
// begins a new counting_since for every instance, and the counts start
// again from zero, tokens and traffic alike; an instance the restarted
// proxy has not learned of has none.
//
// ISX-172, ISX-173, ISX-185, ISX-186, ISX-187.
func TestProxyCommandsISX186(t *testing.T) {
	w := newProxyWorld(t)
	if r := w.run("proxy", "status"); r.code != exitFailure || !strings.Contains(r.stderr, "not running") {
		t.Fatalf("status before anything started it: %s", r)
	}
	// --json says so too, for programs, and exits 1 as the table does.
	if r := w.run("proxy", "status", "--json"); r.code != exitFailure || strings.TrimSpace(r.stdout) != "{\n  \"running\": false\n}" {
		t.Errorf("status --json before anything started it: %s", r)
	}
	r := w.ok("branch", "p1", "--from", proxyTemplate, "--proxy-only")
	if !strings.Contains(r.stderr, "started the host proxy") {
		t.Errorf("branch did not say it started the proxy: %s", r)
	}
	status := w.ok("proxy", "status").stdout
	for _, want := range []string{"running", "pid", "accounts", "1 in " + config.AccountsPath(w.home), filepath.Join(config.ProxyDir(w.home), proxy.LogFile)} {
		if !strings.Contains(status, want) {
			t.Errorf("status lacks %q:\n%s", want, status)
		}
	}
	var statusJSON struct {
		Running      bool   `json:"running"`
		PID          int    `json:"pid"`
		Project      string `json:"project"`
		StartedAt    string `json:"started_at"`
		Accounts     int    `json:"accounts"`
		AccountsFile string `json:"accounts_file"`
		Log          string `json:"log"`
	}
	if err := json.Unmarshal([]byte(w.ok("proxy", "status", "--json").stdout), &statusJSON); err != nil {
		t.Fatal(err)
	}
	if !statusJSON.Running || statusJSON.PID <= 0 || statusJSON.Project != w.project || statusJSON.StartedAt == "" || statusJSON.Accounts != 1 ||
		statusJSON.AccountsFile != config.AccountsPath(w.home) || statusJSON.Log != filepath.Join(config.ProxyDir(w.home), proxy.LogFile) {
		t.Errorf("status --json: %+v", statusJSON)
	}
	proxytest.PushClient(t, w.client, "p1")
	w.inside("p1", modelCall(false))
	w.inside("p1", modelCall(true))
	first, ok := activityOf(w.report(), "p1")
	sum := w.anthropic.Sum()
	if !ok || first.Requests != 2 || first.InputTokens != sum.Input || first.OutputTokens != sum.Output || first.TrafficRequests != 2 {
		t.Fatalf("activity before the restart: %+v (the fake sent %+v)", first, sum)
	}
	out := w.ok("proxy", "activity").stdout
	header, rows := table(out, "INSTANCE")
	if len(header) < 10 || len(rows) != 1 || rows[0][0] != "p1" || rows[0][2] != fmt.Sprint(sum.Input) || rows[0][7] != "2" {
		t.Errorf("the activity table:\n%s", out)
	}
	// Each column says what it counts in: tokens, model calls, requests,
	// a duration, bytes.
	if want := []string{"INSTANCE", "COUNTING SINCE", "TOKENS IN", "TOKENS OUT", "CACHE READ TOKENS", "CACHE WRITE TOKENS", "TOKENS PER MINUTE", "MODEL CALLS", "CALLS IN FLIGHT", "IDLE", "REQUESTS", "REQUESTS OPEN", "SENT", "RECEIVED"}; !slices.Equal(header, want) {
		t.Errorf("the activity table's header is %q, want %q", header, want)
	} else if spend := rows[0][6]; !regexp.MustCompile(`^[▁▂▃▄▅▆▇█]{15}$`).MatchString(spend) || !strings.Contains(spend, "█") {
		// Issue 25: the last 15 minutes' spend, the two calls' minute
		// the highest.
		t.Errorf("the activity table's sparkline %q is not 15 minutes with the calls' minute full", spend)
	} else if idle, sent := rows[0][9], rows[0][12]; !regexp.MustCompile(`^\d+(ms|s|m\d+s)$|^-$`).MatchString(idle) || !strings.HasSuffix(sent, "B") {
		t.Errorf("the activity table's IDLE %q and SENT %q lack their units", idle, sent)
	}

	// A stopped instance is not known to the proxy that restarts.
	w.ok("branch", "p2", "--from", proxyTemplate)
	if err := w.client.StopInstance(context.Background(), "p2", incus.StopOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	restartedAt := time.Now().Add(-time.Second)
	w.ok("proxy", "restart")
	second, ok := activityOf(w.report(), "p1")
	if !ok || second.CountingSince == first.CountingSince || second.Requests != 0 || second.InputTokens != 0 || second.TrafficRequests != 0 || second.TrafficBytesReceived != 0 {
		t.Errorf("after the restart: %+v (before: %s)", second, first.CountingSince)
	}
	unknown, err := proxy.Connect(w.home).Activity(context.Background(), "p2")
	if err != nil || unknown.Known() || unknown.IdleSeconds != nil {
		t.Errorf("the stopped instance after the restart: %+v, %v", unknown, err)
	}
	// The instance keeps its secret across the restart, and is counted
	// from the new counting_since.
	w.inside("p1", modelCall(false))
	calledAt := time.Now().Add(time.Second)
	third, _ := activityOf(w.report(), "p1")
	since, _ := proxy.ParseTime(third.CountingSince)
	if since.Before(restartedAt) || since.After(calledAt) || third.Requests != 1 || third.CountingSince != second.CountingSince {
		t.Errorf("counting since %s, restarted at %s, called before %s: %+v", since, restartedAt, calledAt, third)
	}

	w.ok("proxy", "stop")
	if r := w.run("proxy", "activity"); r.code != exitFailure || !strings.Contains(r.stderr, "not running") {
		t.Errorf("activity of a stopped proxy: %s", r)
	}
}

// kill -9 of the proxy while an instance calls in a loop: the next isx
// branch starts it again, the instance reaches it again with the secret
// it has, and its counts start again under a new counting_since.
func TestProxyKilledUnderLoadRecovers(t *testing.T) {
	w := newProxyWorld(t)
	w.ok("branch", "busy", "--from", proxyTemplate, "--proxy-only")
	proxytest.PushClient(t, w.client, "busy")
	w.inside("busy", "setsid sh -c 'while true; do "+modelCall(true)+" >/tmp/load.log 2>&1; done' >/dev/null 2>&1 &")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if incustest.Poll(ctx, incustest.PollInterval, func() bool { return len(w.anthropic.Calls()) >= 5 }) != nil {
		t.Fatalf("the load does not reach the fake; in the instance:\n%s", w.inside("busy", "ps; cat /tmp/load.log"))
	}
	c := proxy.Connect(w.home)
	before, err := c.Activity(context.Background(), "busy")
	if err != nil {
		t.Fatal(err)
	}
	status, err := c.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(status.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	incustest.WaitFor(t, "the killed proxy to stop answering", time.Minute, func() bool {
		_, err := c.Status(context.Background())
		return proxy.IsNotRunning(err)
	})
	killed := len(w.anthropic.Calls())
	r := w.ok("branch", "next", "--from", proxyTemplate)
	if !strings.Contains(r.stderr, "started the host proxy") {
		t.Errorf("branch did not restart the proxy: %s", r)
	}
	incustest.WaitFor(t, "the busy instance to reach the restarted proxy", time.Minute, func() bool { return len(w.anthropic.Calls()) >= killed+3 })
	after, err := c.Activity(context.Background(), "busy")
	if err != nil {
		t.Fatal(err)
	}
	if after.CountingSince == before.CountingSince || !after.Known() || after.Requests == 0 {
		t.Errorf("after the restart: %+v (before: %+v)", after, before)
	}
	proxytest.PushClient(t, w.client, "next")
	w.inside("next", modelCall(false))
}

// A proxy does not start on an accounts.yaml others may read, and says
// which file and how to fix it; isx branch still makes the instance and
// says why it reaches nothing yet.
func TestProxyRefusesReadableAccounts(t *testing.T) {
	w := newProxyWorld(t)
	w.writeAccounts(0o644)
	r := w.run("proxy", "start")
	if r.code != exitFailure || !strings.Contains(r.stderr, config.AccountsPath(w.home)) || !strings.Contains(r.stderr, "chmod 600") {
		t.Errorf("start with a readable accounts.yaml: %s", r)
	}
	r = w.ok("branch", "p", "--from", proxyTemplate)
	if !strings.Contains(r.stderr, "cannot reach model providers") || !strings.Contains(r.stderr, "chmod 600") {
		t.Errorf("branch with a readable accounts.yaml: %s", r)
	}
	w.writeAccounts(0o600)
	w.ok("proxy", "start")
	if a, err := proxy.Connect(w.home).Activity(context.Background(), "p"); err != nil || !a.Known() {
		t.Errorf("the proxy started later does not serve the instance: %+v, %v", a, err)
	}
}
