package main

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/proxy"
	"github.com/incusspawn/isx/internal/isx/proxy/proxytest"
)

// mcpInside is the go-sdk client run in an instance, at mcp.isx.internal
// through the proxy its environment names, with its current secret.
const mcpInside = proxytest.ClientPath + " mcp -secret-file " + instance.SecretFile + " "

// tryInside runs a script in the instance with the proxy's environment and
// returns its output and exit code.
func (w *proxyWorld) tryInside(name, script string) (string, int) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := w.client.Exec(ctx, name, incus.ExecRequest{Command: []string{"sh", "-c", ". " + instance.ProfileFile + "; " + script}, Timeout: 2 * time.Minute})
	if err != nil {
		w.t.Fatal(err)
	}
	return string(res.Stdout) + string(res.Stderr), res.ExitCode
}

// callInside calls a tool from inside and decodes its structured result.
func (w *proxyWorld) callInside(name, tool string, args map[string]any, out any) string {
	w.t.Helper()
	raw, _ := json.Marshal(args)
	text := w.inside(name, mcpInside+"call "+tool+" '"+string(raw)+"'")
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, "result="); ok && out != nil {
			if err := json.Unmarshal([]byte(rest), out); err != nil {
				w.t.Fatalf("%s: %v\n%s", tool, err, text)
			}
		}
	}
	if !strings.Contains(text, "isError=false") {
		w.t.Fatalf("%s from %s failed:\n%s", tool, name, text)
	}
	return text
}

// coordinatorProcesses counts the host isx mcp processes serving name.
func coordinatorProcesses(t *testing.T, name string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if len(args) >= 4 && args[0] == isxBinary && args[1] == "mcp" && args[2] == "--coordinator" && args[3] == name {
			n++
		}
	}
	return n
}

// waitSecret waits for a start's secret other than old.
func (w *proxyWorld) waitSecret(name, old string) string {
	w.t.Helper()
	var secret string
	incustest.WaitFor(w.t, "the new secret of "+name, 2*time.Minute, func() bool {
		data, err := w.client.PullFile(context.Background(), name, instance.SecretFile)
		secret = strings.TrimSpace(string(data))
		return err == nil && secret != "" && secret != old
	})
	return secret
}

// ISX-212, ISX-213, ISX-214, ISX-215, ISX-216, ISX-217, ISX-218, ISX-219, ISX-232,
// ISX-220, ISX-226, ISX-227, ISX-228, ISX-230, ISX-231, ISX-234, ISX-235,
// ISX-236, ISX-237, ISX-238, ISX-239, ISX-240, ISX-241, ISX-242: a coordinator branched with --proxy-only --mcp-client runs the
// go-sdk client inside, creates an instance and runs exec in it through
// https://mcp.isx.internal/mcp; a restart keeps what it holds, with
// nothing to adopt; a second connection ends the first; a copy cannot
// connect; destroying the coordinator orphans its instances. Every call
// from inside is a new client process and connection, as a restarted
// Claude Code is (ISX-233): what the coordinator made stays held by it.
func TestCoordinatorInAnInstance(t *testing.T) {
	w := newProxyWorld(t)
	if err := os.WriteFile(config.MCPPath(w.home), []byte("templates: ["+proxyTemplate+"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := w.run("branch", "air", "--from", proxyTemplate, "--airgap", "--mcp-client"); r.code == 0 || !strings.Contains(r.stderr, "--airgap instance cannot reach isx mcp") {
		t.Errorf("--airgap --mcp-client: %s", r)
	}
	out := w.ok("branch", "coord", "--from", proxyTemplate, "--proxy-only", "--mcp-client").stdout
	if !strings.Contains(out, "isx mcp at https://mcp.isx.internal/mcp answers coord: version ") || !strings.Contains(out, " tools.") {
		t.Errorf("the branch report does not name the server's version and tools:\n%s", out)
	}
	if !strings.Contains(out, "coord has no Claude Code") {
		t.Errorf("the branch report does not say whether Claude Code has the server:\n%s", out)
	}
	proxytest.PushClient(t, w.client, "coord")

	listing := w.inside("coord", mcpInside+"tools")
	if !strings.Contains(listing, "server=isx ") || !strings.Contains(listing, "prompts=coordinate") {
		t.Errorf("tools/list and prompts/list from inside:\n%s", listing)
	}
	// Exactly the tools of a host session.
	if inside, host := namesLine(listing), w.stdioTools(); !slices.Equal(inside, host) || len(host) == 0 {
		t.Errorf("the coordinator's tools %v, a host session's %v", inside, host)
	}

	// ISX-232: the same templates and limits, from the same mcp.yaml.
	var inside any
	w.callInside("coord", "list_templates", map[string]any{}, &inside)
	if host := w.stdioCall("list_templates"); !reflect.DeepEqual(inside, host) {
		t.Errorf("list_templates differs:\ninside %v\nhost   %v", inside, host)
	}

	// mcp.isx.internal resolves inside to the coordinator's way to the
	// proxy, and a client that uses no proxy reaches isx mcp there too.
	if hosts := w.inside("coord", "getent hosts mcp.isx.internal 2>/dev/null || grep ' mcp.isx.internal' /etc/hosts"); !strings.HasPrefix(strings.TrimSpace(hosts), "127.0.0.1") {
		t.Errorf("mcp.isx.internal resolves to %q", hosts)
	}
	noProxy := "env -u HTTPS_PROXY -u https_proxy -u HTTP_PROXY -u http_proxy "
	if direct := w.inside("coord", noProxy+mcpInside+"tools"); !strings.Contains(direct, "server=isx ") {
		t.Errorf("without a proxy in the environment:\n%s", direct)
	}

	// Without the secret, or with a wrong one: refused.
	if text, code := w.tryInside("coord", proxytest.ClientPath+" mcp tools"); code == 0 || !strings.Contains(text, "Unauthorized") {
		t.Errorf("without the secret: exit %d\n%s", code, text)
	}

	var created struct {
		Name string `json:"instance"`
	}
	w.callInside("coord", "create_instance", map[string]any{"template": proxyTemplate, "name_hint": "w1", "purpose": "coordinator test"}, &created)
	if created.Name == "" {
		t.Fatal("create_instance named nothing")
	}
	text := w.callInside("coord", "exec", map[string]any{"instance": created.Name, "command": "echo made-by-$(hostname)"}, nil)
	if !strings.Contains(text, "made-by-"+created.Name) {
		t.Errorf("exec through the coordinator:\n%s", text)
	}
	if n := coordinatorProcesses(t, "coord"); n != 1 {
		t.Errorf("%d host isx mcp processes serve coord, want 1", n)
	}

	// One connection at a time.
	if two := w.inside("coord", mcpInside+"two"); !strings.Contains(two, "second=ok") || !strings.Contains(two, "first=ended") {
		t.Errorf("a second connection did not end the first:\n%s", two)
	}

	// A restart of the coordinator keeps what it holds: nothing to adopt.
	old := strings.TrimSpace(w.inside("coord", "cat "+instance.SecretFile))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := w.client.RestartInstance(ctx, "coord", incus.StopOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	w.waitSecret("coord", old)
	// What isx start_instance does before it says the instance is ready.
	if _, err := proxy.Connect(w.home).Admit(ctx, "coord"); err != nil {
		t.Fatal(err)
	}
	var listed struct {
		Instances []listedInstance `json:"instances"`
	}
	w.callInside("coord", "list_instances", map[string]any{}, &listed)
	if !slices.Contains(listed.Instances, listedInstance{Name: created.Name, State: "ready"}) {
		t.Errorf("after the restart list_instances does not show %s held: %+v", created.Name, listed)
	}
	if text := w.callInside("coord", "exec", map[string]any{"instance": created.Name, "command": "echo still-mine"}, nil); !strings.Contains(text, "still-mine") {
		t.Errorf("exec after the restart:\n%s", text)
	}
	// The old secret no longer works.
	if text, code := w.tryInside("coord", "echo "+old+" > /tmp/old; "+proxytest.ClientPath+" mcp -secret-file /tmp/old tools"); code == 0 {
		t.Errorf("the previous start's secret still works:\n%s", text)
	}

	// ISX-241: nothing made through MCP is a coordinator.
	proxytest.PushClient(t, w.client, created.Name)
	if text, code := w.tryInside(created.Name, mcpInside+"tools"); code == 0 || !strings.Contains(text, "Forbidden") {
		t.Errorf("an instance made by create_instance reached isx mcp: exit %d\n%s", code, text)
	}

	// A copy of the coordinator has no grant.
	if err := w.client.StopInstance(ctx, "coord", incus.StopOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	w.ok("branch", "copy", "--from", "coord", "--proxy-only")
	if err := w.client.StartInstance(ctx, "coord"); err != nil {
		t.Fatal(err)
	}
	if _, err := proxy.Connect(w.home).Admit(ctx, "coord"); err != nil {
		t.Fatal(err)
	}
	if text, code := w.tryInside("copy", mcpInside+"tools"); code == 0 || !strings.Contains(text, "Forbidden") {
		t.Errorf("the copy reached isx mcp: exit %d\n%s", code, text)
	}
	// ISX-217: the coordinator's own secret, sent from another instance.
	coordSecret := strings.TrimSpace(w.inside("coord", "cat "+instance.SecretFile))
	if text, code := w.tryInside("copy", "echo "+coordSecret+" > /tmp/s; "+proxytest.ClientPath+" mcp -secret-file /tmp/s tools"); code == 0 || !strings.Contains(text, "Unauthorized") {
		t.Errorf("coord's secret from another instance: exit %d\n%s", code, text)
	}
	if text, code := w.tryInside("copy", noProxy+mcpInside+"tools"); code == 0 {
		t.Errorf("the copy reached isx mcp without the proxy:\n%s", text)
	}
	if hosts, _ := w.tryInside("copy", "grep mcp.isx.internal /etc/hosts"); strings.Contains(hosts, "mcp.isx.internal") {
		t.Errorf("the copy still names mcp.isx.internal: %s", hosts)
	}

	// Destroying the coordinator orphans its instances.
	w.ok("destroy", "--force", "coord")
	_, rows := table(w.ok("list").stdout, "NAME")
	if got := row(rows, created.Name); len(got) != 4 || got[3] != "orphaned" {
		t.Errorf("after destroying coord, %s is %v", created.Name, got)
	}
	incustest.WaitFor(t, "coord's isx mcp to end", time.Minute, func() bool { return coordinatorProcesses(t, "coord") == 0 })

	// ISX-238: a new coordinator under the same name is another session.
	w.ok("branch", "coord", "--from", proxyTemplate, "--proxy-only", "--mcp-client")
	proxytest.PushClient(t, w.client, "coord")
	listed.Instances = nil
	w.callInside("coord", "list_instances", map[string]any{}, &listed)
	if slices.Contains(listed.Instances, listedInstance{Name: created.Name, State: "ready"}) {
		t.Errorf("the new coord holds the old one's %s: %+v", created.Name, listed)
	}
	raw, _ := json.Marshal(map[string]any{"instance": created.Name, "command": "true"})
	if text := w.inside("coord", mcpInside+"call exec '"+string(raw)+"'"); !strings.Contains(text, "isError=true") {
		t.Errorf("the new coord ran exec on the old one's instance:\n%s", text)
	}

	// ISX-239: what it holds of a template no longer approved is released
	// when it next connects.
	var unapproved struct {
		Name string `json:"instance"`
	}
	w.callInside("coord", "create_instance", map[string]any{"template": proxyTemplate, "name_hint": "w3", "purpose": "unapproved"}, &unapproved)
	if err := os.WriteFile(config.MCPPath(w.home), []byte("templates: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w.inside("coord", mcpInside+"tools")
	_, rows = table(w.ok("list").stdout, "NAME")
	if got := row(rows, unapproved.Name); len(got) != 4 || got[3] != "orphaned" {
		t.Errorf("after unapproving its template and reconnecting, %s is %v", unapproved.Name, got)
	}
	if err := os.WriteFile(config.MCPPath(w.home), []byte("templates: ["+proxyTemplate+"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// ISX-237: withdrawing the grant orphans what the coordinator holds,
	// as the next session to look sees.
	var second struct {
		Name string `json:"instance"`
	}
	w.callInside("coord", "create_instance", map[string]any{"template": proxyTemplate, "name_hint": "w2", "purpose": "withdrawn"}, &second)
	err := w.client.UpdateInstance(ctx, "coord", func(inst *incus.Instance) error {
		delete(inst.Config, instance.KeyCoordinator)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if text, code := w.tryInside("coord", mcpInside+"tools"); code == 0 || !strings.Contains(text, "Forbidden") {
		t.Errorf("a coordinator whose grant was withdrawn still connects: exit %d\n%s", code, text)
	}
	w.stdioCall("list_instances")
	_, rows = table(w.ok("list").stdout, "NAME")
	if got := row(rows, second.Name); len(got) != 4 || got[3] != "orphaned" {
		t.Errorf("after withdrawing the grant, %s is %v", second.Name, got)
	}
}

// stdioCall makes one call in a host stdio session of isx mcp and
// returns its structured result.
func (w *proxyWorld) stdioCall(tool string) any {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "test"}, nil)
	session, err := c.Connect(ctx, &mcp.CommandTransport{Command: w.command(ctx, "mcp")}, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	defer session.Close()
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
	if err != nil || res.IsError {
		w.t.Fatalf("%s: %v %+v", tool, err, res)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var out any
	json.Unmarshal(raw, &out) //nolint:errcheck // just encoded
	return out
}

type listedInstance struct {
	Name  string `json:"instance"`
	State string `json:"state"`
}

// namesLine is the sorted tool names the in-instance client printed.
func namesLine(listing string) []string {
	for _, line := range strings.Split(listing, "\n") {
		if rest, ok := strings.CutPrefix(line, "names="); ok {
			names := strings.Split(rest, ",")
			slices.Sort(names)
			return names
		}
	}
	return nil
}

// stdioTools are the tools a host session of isx mcp lists, sorted.
func (w *proxyWorld) stdioTools() []string {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "test"}, nil)
	session, err := c.Connect(ctx, &mcp.CommandTransport{Command: w.command(ctx, "mcp")}, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	defer session.Close()
	tools, err := session.ListTools(ctx, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

// ISX-229: when the host proxy cannot serve the new coordinator (here it
// refuses to start over an accounts.yaml others can read), `isx branch
// --mcp-client` says that isx mcp could not be reached, and why.
func TestBranchMCPClientSaysWhyUnreachableISX229(t *testing.T) {
	w := newProxyWorld(t)
	w.writeAccounts(0o644)
	r := w.ok("branch", "lost", "--from", proxyTemplate, "--proxy-only", "--mcp-client")
	if !strings.Contains(r.stdout, "isx mcp at https://mcp.isx.internal/mcp could not be reached from lost: ") {
		t.Errorf("the report does not say isx mcp could not be reached:\n%s", r)
	}
	if !strings.Contains(r.stdout, "the host proxy does not serve it: the isx host proxy did not start") || !strings.Contains(r.stdout, "chmod 600") {
		t.Errorf("the report does not say why (the proxy's refusal):\n%s", r)
	}
	if strings.Contains(r.stdout, " answers lost") {
		t.Errorf("the report claims an answer:\n%s", r)
	}
}
