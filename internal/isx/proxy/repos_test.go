package proxy_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/build"
	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/proxy"
	"github.com/incusspawn/isx/internal/isx/proxy/proxytest"
)

// admitter is the proxy as the build uses it.
type admitter struct{ s *proxy.Server }

func (a admitter) Admit(ctx context.Context, name string) error {
	_, err := a.s.Admit(ctx, name)
	return err
}

// A template's tools clone their repositories at build time through the
// proxy, with the GitHub account pinned on the template, which never
// enters the instance; the claude tool trusts every cloned repository; the
// built template keeps no way to the proxy of its own; the agent pushes
// from an instance of it as that account.
//
// ISX-035, ISX-224.
func TestBuildClonesReposThroughTheProxyISX035(t *testing.T) {
	w := newWorld(t, debianAccounts)
	git, err := proxytest.StartGit(t.TempDir(), w.token, "hello from the fake git host\n")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(git.Close)
	w.upstream("github.com", git.URL)
	const repos = "tpl-proxy-repos"
	w.set = buildtest.Templates(t, buildtest.Write(t, accountTemplates), buildtest.Write(t, map[string]string{
		repos + ".yaml": "name: " + repos + "\nparent: " + debianAccounts + "\ntools:\n  - name: claude\n    workdir: work\n    repos:\n      - url: https://github.com/org/repo.git\n        path: work/repo\n      - url: https://github.com/org/repo.git\n",
	}))
	w.start(w.options(clock.Real{}))
	owner, err := instance.CurrentOwner()
	if err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	b := &build.Builder{Client: w.client, Set: w.set, Owner: owner, Out: &progress, NPMCache: buildtest.NPMCache(),
		Proxy: admitter{w.server}, ProxyDir: w.proxyDir()}
	if _, err := b.Build(w.ctx(), build.Request{Templates: []string{repos}}); err != nil {
		t.Fatalf("building %s: %v\n%s\nproxy log:\n%s", repos, err, progress.String(), w.logs.String())
	}
	// The fake refuses a clone without the account's token: the clone
	// above had it.
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+w.token))
	found := false
	for _, auth := range git.Authorizations() {
		found = found || auth == want
	}
	if !found {
		t.Errorf("the git host never saw the template's account: %v", git.Authorizations())
	}
	tpl, _, err := w.client.GetInstance(w.ctx(), repos)
	if err != nil {
		t.Fatal(err)
	}
	if _, has := tpl.Devices[instance.ProxyDevice]; has || tpl.Config["environment."+instance.SecretFileEnv] != "" || instance.ParseStamps(tpl.Config).Type != instance.TypeBase {
		t.Errorf("the built template: devices %v, stamps %v", tpl.Devices, instance.ParseStamps(tpl.Config))
	}
	w.branch("look", repos, instance.NetworkDefault)
	out := w.mustRun("look", "cat /home/agent/work/repo/README.md /home/agent/repo/README.md; stat -c %U /home/agent/work/repo; grep -rl -- '"+w.token+"' /home /etc /root /opt/isx/claude/package/package.json 2>/dev/null; true")
	if strings.Count(out, "hello from the fake git host") != 2 || !strings.Contains(out, "agent\n") {
		t.Errorf("in a branch of the template:\n%s", out)
	}
	// ISX-224: Claude Code's own settings trust the home and every
	// repository the template cloned, as read after the real Claude Code
	// has run as the agent in each of them.
	for _, dir := range []string{"/home/agent/work/repo", "/home/agent/repo"} {
		if out := w.mustRun("look", "runuser -l agent -c 'cd "+dir+" && claude mcp list'"); !strings.Contains(out, "MCP") {
			t.Errorf("claude mcp list in %s:\n%s", dir, out)
		}
	}
	var settings struct {
		Projects map[string]struct {
			HasTrustDialogAccepted bool `json:"hasTrustDialogAccepted"`
		} `json:"projects"`
	}
	decodeJSON(t, w.mustRun("look", "cat /home/agent/.claude.json"), &settings)
	for _, dir := range []string{"/home/agent", "/home/agent/work", "/home/agent/work/repo", "/home/agent/repo"} {
		if !settings.Projects[dir].HasTrustDialogAccepted {
			t.Errorf("Claude Code does not trust %s: %+v", dir, settings.Projects)
		}
	}
	if strings.Contains(out, "/home/") || strings.Contains(out, "/etc/") || strings.Contains(out, "/root/") {
		t.Errorf("the account's token is in a file of the template:\n%s", out)
	}

	// The agent pushes from an instance of the template through the
	// proxy, which authenticates the push as the pinned account.
	before := len(git.Authorizations())
	w.mustRun("look", "runuser -l agent -c '. "+instance.ProfileFile+"; cd work/repo && git -c user.name=a -c user.email=a@example.invalid commit -q --allow-empty -m pushed-by-the-agent && git push -q origin HEAD:main'")
	pushed := false
	for _, auth := range git.Authorizations()[before:] {
		pushed = pushed || auth == want
	}
	if !pushed {
		t.Errorf("the push did not reach the git host as the template's account: %v", git.Authorizations()[before:])
	}
	if log, err := exec.Command("git", "--git-dir", filepath.Join(git.Root, "org", "repo.git"), "log", "-1", "--format=%s", "main").Output(); err != nil || strings.TrimSpace(string(log)) != "pushed-by-the-agent" {
		t.Errorf("the git host's main after the push: %q, %v", log, err)
	}
}
