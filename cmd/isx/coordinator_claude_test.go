package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/build"
	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/delegate/delegatetest"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/incusspawn/isx/internal/isx/instance"
)

var madeInstance = regexp.MustCompile(`mcp-[a-z0-9-]+`)

// fromUnit is the prompt of the claude -p run in a systemd unit.
const fromUnit = "say which tools you have, from a systemd unit"

// ISX-221, ISX-222, ISX-223, ISX-225, ISX-230: in a coordinator of a
// template with Claude Code, every start registers isx (claude mcp list
// shows it, connected, through the headersHelper that reads the current
// secret), and the real Claude Code, driven by a fake model over the
// proxy, creates an instance and runs exec in it through
// mcp.isx.internal, and from a systemd unit is offered its tools too; a
// copy loses the registration at its first start.
func TestCoordinatorClaudeCode(t *testing.T) {
	c := incustest.Project(t)
	x := newCLI(t, c)
	x.env = append(x.env, build.NPMCacheEnv+"="+buildtest.NPMCache())
	tpl := buildtest.DebianChild
	var waitsMu sync.Mutex
	waits := map[string]int{} // WaitForMcpServers calls, by prompt
	fake, err := delegatetest.StartAnthropic(delegatetest.Script{
		Tool: func(prompt string, results, offered []string) (string, map[string]any) {
			waitsMu.Lock()
			defer waitsMu.Unlock()
			// Claude Code connects its MCP servers while the first turn
			// starts; on a loaded machine isx's may still be connecting,
			// and the model is given WaitForMcpServers for that. Calling
			// it is what a model does, and isx's tools are then offered.
			if !slices.Contains(offered, "mcp__isx__exec") && slices.Contains(offered, "WaitForMcpServers") && waits[prompt] < 3 {
				waits[prompt]++
				return "WaitForMcpServers", map[string]any{}
			}
			// The waits' results come first; the script reads the rest.
			results = results[min(waits[prompt], len(results)):]
			if strings.Contains(prompt, fromUnit) {
				return "", nil // only the tools on offer matter
			}
			switch len(results) {
			case 0:
				if slices.Contains(offered, "mcp__isx__create_instance") {
					return "mcp__isx__create_instance", map[string]any{"template": tpl, "name_hint": "cc", "purpose": "made by Claude Code in a coordinator"}
				}
			case 1:
				if name := madeInstance.FindString(results[0]); name != "" {
					return "mcp__isx__exec", map[string]any{"instance": name, "command": "echo claude-was-here-$(id -un)"}
				}
			}
			return "", nil
		},
		Report: func(string) string { return "Done." },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	cfg, err := config.Load(x.home)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(cfg.Path, os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "proxy:\n  upstreams:\n    api.anthropic.com: %s\n", fake.URL)
	f.Close()
	if err := os.WriteFile(config.AccountsPath(x.home), []byte("claude:\n  default: {api-key: sk-ant-api03-coordinator}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(config.MCPPath(x.home), []byte("templates: ["+tpl+"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	x.ok("build", tpl)
	w := &proxyWorld{cli: x, client: c}

	out := x.ok("branch", "coordc", "--from", tpl, "--proxy-only", "--mcp-client").stdout
	if !strings.Contains(out, "Claude Code in coordc lists it: isx: https://mcp.isx.internal/mcp") || !strings.Contains(out, "Connected") {
		t.Errorf("the branch report does not say Claude Code has isx, connected:\n%s", out)
	}
	claude := func(name, script string) (string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		res, err := c.Exec(ctx, name, incus.ExecRequest{
			Command: []string{"sh", "-c", ". " + instance.ProfileFile + "; cd ~/work && " + script},
			UID:     1000, GID: 1000, Cwd: instance.AgentHome + "/work",
			Env:     map[string]string{"HOME": instance.AgentHome, "PATH": "/usr/local/bin:/usr/bin:/bin"},
			Timeout: 3 * time.Minute,
		})
		if err != nil {
			t.Fatal(err)
		}
		return string(res.Stdout) + string(res.Stderr), res.ExitCode
	}
	settings := w.inside("coordc", "cat "+instance.ClaudeConfig)
	if !strings.Contains(settings, `"headersHelper": "`+instance.HeadersHelper+`"`) || !strings.Contains(settings, instance.CoordinatorURL) {
		t.Errorf("the registration in %s:\n%s", instance.ClaudeConfig, settings)
	}
	if helper := w.inside("coordc", instance.HeadersHelper); !strings.Contains(helper, strings.TrimSpace(w.inside("coordc", "cat "+instance.SecretFile))) {
		t.Errorf("the headersHelper prints %q", helper)
	}

	// The real Claude Code calls isx mcp's tools.
	// Tool search off: Claude Code then offers the MCP tools themselves
	// rather than behind ToolSearch, which the fake model cannot drive.
	// Claude Code connects its MCP servers in the background and, after
	// MCP_CONNECT_TIMEOUT_MS (5 s), starts without those still connecting:
	// on a loaded 2-core CI machine isx was once among them.
	// MCP_CONNECTION_NONBLOCKING=0 makes claude -p wait for them, as long
	// as MCP_TIMEOUT, for which the tests allow three minutes.
	text, code := claude("coordc", "ENABLE_TOOL_SEARCH=false MCP_CONNECTION_NONBLOCKING=0 MCP_TIMEOUT=180000 claude -p --permission-mode bypassPermissions 'make an instance and say hello in it'")
	if code != 0 {
		t.Fatalf("claude -p: exit %d\n%s\nfake calls: %d", code, text, len(fake.Calls()))
	}
	var sawExec bool
	for _, call := range fake.Calls() {
		// The exec's output, as the tool result Claude Code sent back.
		if strings.Contains(string(call.Body), `\"stdout\":\"claude-was-here-`) {
			sawExec = true
		}
	}
	if !sawExec {
		var offered []string
		if calls := fake.Calls(); len(calls) > 0 {
			offered = calls[len(calls)-1].Tools
		}
		var last string
		if calls := fake.Calls(); len(calls) > 0 {
			var req struct {
				Messages json.RawMessage `json:"messages"`
			}
			json.Unmarshal(calls[len(calls)-1].Body, &req) //nolint:errcheck // for the failure's message
			last = string(req.Messages)
			last = last[max(0, len(last)-3000):]
		}
		t.Errorf("Claude Code did not run exec through isx mcp; tools offered: %v\n%s\nthe last call ends:\n%s", offered, text, last)
	}
	_, rows := table(x.ok("list").stdout, "NAME")
	held := false
	for _, r := range rows {
		if strings.Contains(r[0], "-cc-") && len(r) == 4 && strings.HasPrefix(r[3], "held") {
			held = true
		}
	}
	if !held {
		t.Errorf("no instance held by the coordinator in isx list: %v", rows)
	}

	// Taken out, the registration is back at the next start.
	claude("coordc", "claude mcp remove isx --scope local >/dev/null 2>&1 || claude mcp remove isx >/dev/null 2>&1; true")
	if list, _ := claude("coordc", "claude mcp list"); strings.Contains(list, "isx:") {
		t.Fatalf("the registration was not removed:\n%s", list)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	old := strings.TrimSpace(w.inside("coordc", "cat "+instance.SecretFile))
	if err := c.RestartInstance(ctx, "coordc", incus.StopOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	w.waitSecret("coordc", old)
	incustest.WaitFor(t, "isx to be registered again", 2*time.Minute, func() bool {
		list, _ := claude("coordc", "claude mcp list")
		return strings.Contains(list, "isx: "+instance.CoordinatorURL) && strings.Contains(list, "Connected")
	})

	// ISX-223: the registration serves claude -p under a systemd unit too.
	unit := "systemd-run --wait --pipe --quiet --uid=1000 --gid=1000 -p WorkingDirectory=" + instance.AgentHome + "/work" +
		" -E HOME=" + instance.AgentHome + " -E PATH=/usr/local/bin:/usr/bin:/bin" +
		" sh -c '. " + instance.ProfileFile + "; ENABLE_TOOL_SEARCH=false MCP_CONNECTION_NONBLOCKING=0 MCP_TIMEOUT=180000 claude -p \"" + fromUnit + "\"'"
	unitOut, code := w.tryInside("coordc", unit)
	if code != 0 {
		t.Fatalf("claude -p in a systemd unit: exit %d\n%s", code, unitOut)
	}
	unitOffered := false
	var unitCalls [][]string
	for _, call := range fake.Calls() {
		if !strings.Contains(string(call.Body), fromUnit) {
			continue
		}
		unitCalls = append(unitCalls, call.Tools)
		if slices.Contains(call.Tools, "mcp__isx__exec") && slices.Contains(call.Tools, "mcp__isx__create_instance") {
			unitOffered = true
		}
	}
	if !unitOffered {
		list, _ := claude("coordc", "claude mcp list")
		t.Errorf("claude -p in a systemd unit was not offered isx mcp's tools; its calls offered %v\nit printed:\n%s\nclaude mcp list now:\n%s", unitCalls, unitOut, list)
	}

	// A copy loses it at its first start.
	if err := c.StopInstance(ctx, "coordc", incus.StopOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	x.ok("branch", "copyc", "--from", "coordc", "--proxy-only")
	if list, _ := claude("copyc", "claude mcp list"); strings.Contains(list, "isx:") {
		t.Errorf("the copy still has isx registered:\n%s", list)
	}
}
