package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/holding"
	"github.com/incusspawn/isx/internal/isx/holding/holdingtest"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/proxy"
	"github.com/incusspawn/isx/internal/isx/proxy/proxytest"
	"github.com/incusspawn/isx/internal/isx/template"
)

const proxyTemplate = "tpl-mcp-proxy"

// proxyEnv is an env whose templates include one naming a claude account,
// with accounts.yaml and config.yaml sending api.anthropic.com to a fake.
type proxyEnv struct {
	*env
	anthropic *proxytest.Anthropic
	apiKey    string
}

func newProxyEnv(t *testing.T) *proxyEnv {
	t.Helper()
	e := newEnv(t)
	a, err := proxytest.StartAnthropic()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	p := &proxyEnv{env: e, anthropic: a, apiKey: fmt.Sprintf("sk-ant-api03-mcp-%d", time.Now().UnixNano())}
	dir := buildtest.Write(t, map[string]string{proxyTemplate + ".yaml": "name: " + proxyTemplate + "\nparent: tpl-test-busybox\naccounts: {claude: work}\n"})
	buildtest.Build(t, e.client, buildtest.Templates(t, dir), proxyTemplate)
	cfg := fmt.Sprintf("project: %s\ntemplate-paths: [%s, %s]\nproxy:\n  upstreams:\n    api.anthropic.com: %s\n", e.client.ProjectName(), buildtest.Dir(t), dir, a.URL)
	if err := os.WriteFile(config.ConfigPath(e.home), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(config.AccountsPath(e.home), []byte("claude:\n  work: {api-key: "+p.apiKey+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.writeMCP("templates: [" + proxyTemplate + "]\n")
	return p
}

// modelCall makes a streamed model call from inside the instance.
func (p *proxyEnv) modelCall(name string) {
	p.t.Helper()
	p.execIn(name, ". "+instance.ProfileFile+"; "+proxytest.ClientPath+" messages -stream -url "+proxy.AnthropicBaseURL+"/v1/messages -key-file "+instance.SecretFile)
}

// cliActivity is `isx proxy activity --json` for the instance.
func (p *proxyEnv) cliActivity(name string) proxy.Activity {
	p.t.Helper()
	cmd := exec.Command(isxBinary(p.t), "proxy", "activity", "--json")
	cmd.Env = p.environ()
	out, err := cmd.Output()
	if err != nil {
		p.t.Fatalf("isx proxy activity --json: %v", err)
	}
	var report proxy.Report
	if err := json.Unmarshal(out, &report); err != nil {
		p.t.Fatal(err)
	}
	for _, a := range report.Instances {
		if a.Instance == name {
			return a
		}
	}
	p.t.Fatalf("isx proxy activity does not list %s: %s", name, out)
	return proxy.Activity{}
}

// execsDuring reports whether anything was exec'd in the instance while
// do ran: the lifecycle events up to a marker written after do.
func (p *proxyEnv) execsDuring(name string, do func()) bool {
	p.t.Helper()
	ctx, stop := context.WithCancel(p.ctx())
	defer stop()
	stream, err := p.client.Events(ctx, incus.EventLifecycle)
	if err != nil {
		p.t.Fatal(err)
	}
	do()
	marker := fmt.Sprint(time.Now().UnixNano())
	err = p.client.UpdateInstance(p.ctx(), name, func(inst *incus.Instance) error {
		inst.Config["user.isxtest.marker"] = marker
		return nil
	})
	if err != nil {
		p.t.Fatal(err)
	}
	execd := false
	for event := range stream.Events {
		life, err := event.Lifecycle()
		if err != nil || life.Instance() != name {
			continue
		}
		execd = execd || life.Action == "instance-exec"
		if life.Action == "instance-updated" {
			return execd
		}
	}
	p.t.Fatalf("the event stream ended: %v", stream.Err())
	return false
}

// instance_activity answers from the host proxy's counts without running
// anything in the instance, matches `isx proxy activity`, is refused for
// an instance this session does not hold, and after the proxy is killed
// the next call starts it again, counting afresh.
//
// ISX-170, ISX-171, ISX-180, ISX-186, ISX-187.
func TestInstanceActivityISX170ISX187(t *testing.T) {
	p := newProxyEnv(t)
	s := p.start(sessionOptions{})
	var created CreateInstanceResult
	s.ok("create_instance", map[string]any{"template": proxyTemplate, "name_hint": "act"}, &created)
	name := created.Instance
	proxytest.PushClient(t, p.client, name)
	p.modelCall(name)
	p.modelCall(name)

	// The detector sees an exec when there is one.
	if !p.execsDuring(name, func() { p.execIn(name, "true") }) {
		t.Fatal("an exec went unseen in the event stream")
	}
	var got proxy.Activity
	if p.execsDuring(name, func() { s.ok("instance_activity", map[string]any{"instance": name}, &got) }) {
		t.Error("instance_activity ran something in the instance")
	}
	sum := p.anthropic.Sum()
	if got.Requests != 2 || got.InputTokens != sum.Input || got.OutputTokens != sum.Output || got.CacheReadInputTokens != sum.CacheRead ||
		got.CacheCreationInputTokens != sum.CacheCreation || !reflect.DeepEqual(got.ModelUsageProviders, []string{proxy.ProviderAnthropic}) || got.IdleSeconds == nil {
		t.Errorf("instance_activity %+v; the fake sent %+v", got, sum)
	}
	cli := p.cliActivity(name)
	// The two reads may fall in different minutes, which moves the spend
	// history on a place; both hold every token of the calls, made in the
	// last 15 minutes.
	tokens := sum.Input + sum.Output + sum.CacheRead + sum.CacheCreation
	for who, history := range map[string][]int64{"instance_activity": got.TokensPerMinute, "isx proxy activity": cli.TokensPerMinute} {
		spent := int64(0)
		for _, n := range history {
			spent += n
		}
		if len(history) != proxy.SpendMinutes || spent != tokens {
			t.Errorf("%s's tokens per minute %v: want %d minutes holding all %d tokens", who, history, proxy.SpendMinutes, tokens)
		}
	}
	got.IdleSeconds, cli.IdleSeconds = nil, nil
	got.TokensPerMinute, cli.TokensPerMinute = nil, nil
	if !reflect.DeepEqual(got, cli) {
		t.Errorf("instance_activity %+v\nisx proxy activity %+v", got, cli)
	}

	other := p.start(sessionOptions{})
	other.refused("instance_activity", map[string]any{"instance": name}, CodeNotHeld)
	s.refused("instance_activity", map[string]any{"instance": "mcp-nothing-here-abcde"}, CodeNotFound)

	status, err := proxy.Connect(p.home).Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(status.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	incustest.WaitFor(t, "the killed proxy to stop answering", time.Minute, func() bool {
		_, err := proxy.Connect(p.home).Status(context.Background())
		return proxy.IsNotRunning(err)
	})
	var again proxy.Activity
	s.ok("instance_activity", map[string]any{"instance": name}, &again)
	if !again.Known() || again.CountingSince == got.CountingSince || again.Requests != 0 || again.InputTokens != 0 {
		t.Errorf("after the proxy was killed: %+v (before: %s)", again, got.CountingSince)
	}
	p.modelCall(name)
	s.ok("instance_activity", map[string]any{"instance": name}, &again)
	if again.Requests != 1 {
		t.Errorf("the instance does not reach the restarted proxy: %+v", again)
	}
}

// The dormancy of the orphan sweep reads the proxy's counts: a delegate
// whose instance made a model call 4 hours ago is still working after
// 24 hours of grace, though it started 24 hours ago; one with a model
// call in flight works however long ago anything else happened; one
// silent for dormant-after-hours is stopped, and destroyed
// dormant-grace-hours after. The proxy and the sweep share one fake clock.
//
// ISX-013, ISX-014, ISX-208, ISX-210, ISX-211.
func TestDormancyReadsTheCountersISX210(t *testing.T) {
	p := newProxyEnv(t)
	policy, err := config.LoadMCP(p.home)
	if err != nil {
		t.Fatal(err)
	}
	owner, err := instance.CurrentOwner()
	if err != nil {
		t.Fatal(err)
	}
	dead := holdingtest.DeadSession(t)
	now := time.Now().UTC().Truncate(time.Second)
	fake := newFakeProxy(t, p, now)
	m := &instance.Manager{Client: p.client, Clock: clock.Real{}, ProxyDir: config.ProxyDir(p.home)}
	stamps := instance.MCPStamps{Session: dead, Owner: owner, Orphaned: instance.OrphanedValue(now.Add(-25*time.Hour), dead)}
	if err := m.Branch(p.ctx(), instance.BranchOptions{Name: "quiet", From: proxyTemplate, Owner: owner, Config: stamps.Config()}); err != nil {
		t.Fatal(err)
	}
	if _, err := fake.server.Admit(p.ctx(), "quiet"); err != nil {
		t.Fatal(err)
	}
	holdingtest.StartTask(t, p.client, "quiet", "sleep 3600", true)
	proxytest.PushClient(t, p.client, "quiet")
	sweep := func() *holding.SweepReport {
		t.Helper()
		report, err := holding.Sweep(context.Background(), holding.SweepOptions{Client: p.client, Home: p.home, Owner: owner, Session: "sweeper",
			Policy: policy, Clock: fake.clock, Activity: proxy.Connect(p.home)})
		if err != nil {
			t.Fatal(err)
		}
		return report
	}

	fake.clock.Set(now.Add(20 * time.Hour))
	p.modelCall("quiet")
	fake.clock.Set(now.Add(24*time.Hour + time.Minute))
	if report := sweep(); len(report.Stopped) != 0 || report.Left["quiet"] != "an agent it delegated to is still working" {
		t.Fatalf("4 h after a model call: stopped %v, left %q", report.Stopped, report.Left["quiet"])
	}

	// A model call in flight is work, whatever the clock says.
	hold := make(chan struct{})
	p.anthropic.Reply = func(n int, _ proxytest.Call) proxytest.Reply {
		return proxytest.Reply{Usage: proxytest.DefaultUsage(n), Hold: hold}
	}
	done := make(chan struct{})
	var call *incus.ExecResult
	var callErr error
	go func() {
		defer close(done)
		call, callErr = p.client.Exec(context.Background(), "quiet", incus.ExecRequest{
			Command: []string{"sh", "-c", ". " + instance.ProfileFile + "; " + proxytest.ClientPath + " messages -stream -url " + proxy.AnthropicBaseURL + "/v1/messages -key-file " + instance.SecretFile},
		})
	}()
	// Under a loaded CI machine the exec itself can take long to start;
	// a call that ended instead of waiting says why.
	incustest.WaitFor(t, "the held model call to be in flight", 3*time.Minute, func() bool {
		select {
		case <-done:
			return true
		default:
		}
		a, err := proxy.Connect(p.home).Activity(context.Background(), "quiet")
		return err == nil && a.RequestsInFlight == 1
	})
	select {
	case <-done:
		if call != nil {
			t.Fatalf("the held model call ended before it was seen in flight: %v, exit %d, stdout %q, stderr %q", callErr, call.ExitCode, call.Stdout, call.Stderr)
		}
		t.Fatalf("the held model call ended before it was seen in flight: %v", callErr)
	default:
	}
	fake.clock.Set(now.Add(100 * time.Hour))
	if report := sweep(); len(report.Stopped) != 0 {
		t.Fatalf("a delegate with a model call in flight was stopped; left %q", report.Left["quiet"])
	}
	close(hold)
	<-done

	// Silent since the call ended, at 100 h: stopped 24 h later.
	fake.clock.Set(now.Add(123 * time.Hour))
	if report := sweep(); len(report.Stopped) != 0 {
		t.Fatalf("stopped after 23 h of silence")
	}
	stoppedAt := now.Add(124*time.Hour + time.Minute)
	fake.clock.Set(stoppedAt)
	if report := sweep(); len(report.Stopped) != 1 {
		t.Fatalf("not stopped after 24 h of silence; left %q", report.Left["quiet"])
	}
	// Stopped, it is destroyed dormant-grace-hours later, not before.
	fake.clock.Set(stoppedAt.Add(167 * time.Hour))
	if report := sweep(); len(report.Destroyed) != 0 {
		t.Fatalf("destroyed 167 h after it was stopped")
	}
	fake.clock.Set(stoppedAt.Add(168 * time.Hour))
	if report := sweep(); len(report.Destroyed) != 1 {
		t.Fatalf("not destroyed 168 h after it was stopped; left %q", report.Left["quiet"])
	}
}

// fakeProxy is a proxy run in the test on a fake clock.
type fakeProxy struct {
	server *proxy.Server
	clock  *clock.Fake
}

func newFakeProxy(t *testing.T, p *proxyEnv, now time.Time) *fakeProxy {
	t.Helper()
	cfg, err := config.Load(p.home)
	if err != nil {
		t.Fatal(err)
	}
	owner, err := instance.CurrentOwner()
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeProxy{clock: clock.NewFake(now)}
	f.server, err = proxy.New(proxy.Options{
		Home: p.home, Client: p.client, Owner: owner, Upstreams: cfg.Upstreams, Clock: f.clock,
		Templates: func() (*template.Set, error) {
			return template.Load(template.Options{Home: p.home, SearchPaths: cfg.TemplateDirs()})
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- f.server.Run(context.Background()) }()
	t.Cleanup(func() {
		f.server.Stop()
		if err := <-done; err != nil {
			t.Errorf("the proxy ended with %v", err)
		}
	})
	incustest.WaitFor(t, "the proxy to answer", time.Minute, func() bool {
		_, err := proxy.Connect(p.home).Status(context.Background())
		return err == nil
	})
	return f
}
