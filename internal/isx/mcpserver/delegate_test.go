package mcpserver

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/delegate/delegatetest"
	"github.com/incusspawn/isx/internal/isx/proxy"
	"github.com/incusspawn/isx/internal/isx/task"
	"github.com/incusspawn/isx/internal/tracing/tracingtest"
)

// agentsTemplate installs Claude Code and Codex (testdata/templates).
const agentsTemplate = buildtest.DebianChild

// agentWorld is an env with the agents' template, a fake Anthropic and a
// fake OpenAI API that the host proxy sends the instances' model calls
// to, with the accounts it puts in.
type agentWorld struct {
	*env
	anthropic *delegatetest.Anthropic
	openai    *delegatetest.OpenAI
	keys      [2]string // the claude and openai accounts' keys
}

// editScript has the agent append a line naming its prompt's first word
// to notes.txt in its checkout, then report what it did.
// A prompt that begins "sleep N" makes the command sleep N seconds first.
var editScript = delegatetest.Script{
	Command: func(prompt string) string {
		words := strings.Fields(prompt + " empty")
		if words[0] == "sleep" && len(words) > 1 && strings.Trim(words[1], "0123456789:") == "" {
			return "sleep " + strings.TrimSuffix(words[1], ":") + "; echo slept >> notes.txt"
		}
		return fmt.Sprintf("echo 'edit for %s' >> notes.txt", strings.Trim(words[0], "'\"`$\\"))
	},
	Report: func(prompt string) string { return "Done: I appended a line to notes.txt for: " + prompt },
	// A prompt that begins "hold:" gets no answer while the agent waits.
	Hold: func(prompt string) bool { return strings.HasPrefix(prompt, "hold:") },
}

func newAgentWorld(t testing.TB, mcpYAML string) *agentWorld {
	t.Helper()
	return newWorldOf(t, mcpYAML, agentsTemplate)
}

// newWorldOf is an agentWorld with the given agents' templates.
func newWorldOf(t testing.TB, mcpYAML string, templates ...string) *agentWorld {
	t.Helper()
	e := newEnv(t, append([]string{buildtest.Debian}, templates...)...)
	w := &agentWorld{env: e, keys: [2]string{
		fmt.Sprintf("sk-ant-api03-delegate-%d", time.Now().UnixNano()),
		fmt.Sprintf("sk-proj-delegate-%d", time.Now().UnixNano()),
	}}
	var err error
	if w.anthropic, err = delegatetest.StartAnthropic(editScript); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.anthropic.Close)
	if w.openai, err = delegatetest.StartOpenAI(editScript); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.openai.Close)
	cfg := fmt.Sprintf("project: %s\ntemplate-paths: [%s, %s]\nproxy:\n  upstreams:\n    api.anthropic.com: %s\n    api.openai.com: %s\n",
		e.client.ProjectName(), buildtest.Dir(t), buildtest.OthersDir(t), w.anthropic.URL, w.openai.URL)
	if err := os.WriteFile(config.ConfigPath(e.home), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	accounts := fmt.Sprintf("claude:\n  default: {api-key: %s}\nopenai:\n  default: {api-key: %s}\n", w.keys[0], w.keys[1])
	if err := os.WriteFile(config.AccountsPath(e.home), []byte(accounts), 0o600); err != nil {
		t.Fatal(err)
	}
	e.writeMCP(mcpYAML)
	return w
}

// waitFinished waits for the task's finished notification for run.
func waitFinished(t testing.TB, s *session, taskID string, run int, within time.Duration) TaskChanged {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case n := <-s.notes:
			if n.TaskID == taskID && n.Run == run && n.State == TaskFinished {
				return n
			}
		case <-deadline:
			t.Fatalf("no finished notification for run %d of %s within %s\nserver stderr:\n%s", run, taskID, within, s.stderr.String())
		}
	}
}

// The whole flow with the real Claude Code and Codex inside a Debian
// instance, reaching fake providers only through the host proxy: delegate,
// the finished notification, the report, the diff (stat and patch), a
// follow-up that resumes the same session (the fake sees the earlier
// conversation), a second diff, and the tokens the proxy counted.
//
// ISX-066, ISX-067, ISX-069, ISX-070, ISX-071, ISX-072, ISX-073, ISX-074, ISX-075, ISX-076, ISX-077, ISX-078, ISX-082, ISX-083, ISX-085, ISX-089,
// ISX-098, ISX-100, ISX-102, ISX-105, ISX-106, ISX-129, ISX-131, ISX-133, ISX-134, ISX-135, ISX-136, ISX-137,
// ISX-139, ISX-143, ISX-197, ISX-198, ISX-025, ISX-041, ISX-042, ISX-153.
func TestDelegateFlowISX066(t *testing.T) {
	w := newAgentWorld(t, "templates: ["+agentsTemplate+"]\n")
	// ISX-279, ISX-280: the server runs in a checkout of the host, which
	// no tool reads or writes; the results come back as text.
	checkout := hostCheckout(t)
	watch := watchTree(t, checkout)
	jaeger := tracingtest.Jaeger(t)
	service := fmt.Sprintf("isx-mcp-delegate-%d", time.Now().UnixNano())
	s := w.start(sessionOptions{notify: true, dir: checkout,
		env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + jaeger.OTLP, "OTEL_SERVICE_NAME=" + service, "OTEL_BSP_SCHEDULE_DELAY=50"}})
	defer func() {
		if seen := watch.events(t); len(seen) > 0 {
			t.Errorf("the tools touched the host checkout: %v", seen)
		}
	}()

	var templates ListTemplatesResult
	s.ok("list_templates", map[string]any{}, &templates)
	desc := templates.Templates[0]
	raw, _ := json.Marshal(desc)
	if desc.DefaultDelegateAgent != "claude" || !desc.SupportsAsk || desc.SummaryAgent != "claude" || len(desc.DelegateAgents) != 2 {
		t.Fatalf("descriptors = %s", raw)
	}
	for _, d := range desc.DelegateAgents {
		switch d.Agent {
		case "claude":
			if d.Model != "claude-sonnet-4-5" || !d.SupportsModelPreflight || d.PermissionMode != "bypassPermissions" || d.ApprovalPolicy != "" {
				t.Errorf("claude descriptor %+v", d)
			}
		case "codex":
			if d.Model != "gpt-5" || d.SupportsModelPreflight || d.PermissionMode != "danger-full-access" || d.ApprovalPolicy != "never" {
				t.Errorf("codex descriptor %+v", d)
			}
		default:
			t.Errorf("descriptor of %s", d.Agent)
		}
	}
	// ISX-080: no retired field.
	if strings.Contains(string(raw), "max_turns") || strings.Contains(string(raw), "refusal") {
		t.Errorf("a retired field is listed: %s", raw)
	}
	// ISX-025: an unapproved template makes no instance.
	s.refused("delegate", map[string]any{"template": buildtest.Debian, "instruction": "x"}, CodeNotApproved)
	// ISX-096: max_turns is refused.
	s.refused("delegate", map[string]any{"template": agentsTemplate, "instruction": "x", "max_turns": 3}, CodeInvalidArgument)

	for _, agent := range []string{"claude", "codex"} {
		t.Run(agent, func(t *testing.T) {
			w.flow(t, s, agent)
		})
	}
	checkTaskSpans(t, jaeger, service)
}

// checkTaskSpans checks the spans of the flows' tasks (issue 25): each run
// of each task is a span beneath the tool call that started it (delegate,
// then send_message), from its start to the end the session saw, which
// says how it ended.
func checkTaskSpans(t *testing.T, jaeger tracingtest.Receiver, service string) {
	starters := map[string]string{}
	for tool, calls := range map[string]int{"delegate": 4, "send_message": 2} {
		for _, span := range jaeger.Operation(t, service, "tools/call "+tool, calls) {
			starters[span.SpanID] = tool
		}
	}
	runs := map[string]int{}
	for _, span := range jaeger.Operation(t, service, "task delegate", 4) {
		run, _ := span.Tag("isx.task.run").(float64)
		want := map[float64]string{1: "delegate", 2: "send_message"}[run]
		if starters[span.Parent()] != want || want == "" {
			t.Errorf("run %v of task %v: parent %s is a %q call, want %q", run, span.Tag("isx.task_id"), span.Parent(), starters[span.Parent()], want)
		}
		if span.Tag("isx.task.state") != "finished" || span.Tag("isx.task.exit_code") != float64(0) || span.Tag("isx.instance") == nil {
			t.Errorf("task span %s: %+v", span.OperationName, span.Tags)
		}
		runs[fmt.Sprint(span.Tag("isx.task_id"))]++
	}
	if len(runs) != 2 {
		t.Errorf("task spans of %d tasks (%v), want the two flows'", len(runs), runs)
	}
}

func (w *agentWorld) flow(t *testing.T, s *session, agent string) {
	args := map[string]any{"template": agentsTemplate, "instruction": "banana: add a line to notes.txt", "idempotency_key": "flow:" + agent}
	if agent == "codex" {
		args["agent"], args["name_hint"] = "codex", "fix-ci"
	}
	var d DelegateResult
	s.ok("delegate", args, &d)
	hint := "task"
	if agent == "codex" {
		hint = "fix-ci"
	}
	if !strings.HasPrefix(d.Instance, "mcp-test-debian-child-"+hint+"-") || d.Agent != agent || d.Kind != KindDelegate || d.Run != 1 {
		t.Fatalf("delegate = %+v", d)
	}
	if d.JoinCommand != task.JoinCommand(d.TaskID, d.Instance) {
		t.Errorf("join_command %q", d.JoinCommand)
	}
	// ISX-153: a repeat with the key returns the same task, in the same
	// instance, and starts nothing.
	var again DelegateResult
	s.ok("delegate", args, &again)
	if !again.Replayed || again.TaskID != d.TaskID || again.Instance != d.Instance {
		t.Errorf("the repeat = %+v, first %+v", again, d)
	}
	before := w.activity(t, s, d.Instance)
	n := waitFinished(t, s, d.TaskID, 1, 3*time.Minute)
	if n.ExitCode == nil || *n.ExitCode != 0 {
		var res TaskResultResult
		s.ok("task_result", map[string]any{"instance": d.Instance, "task_id": d.TaskID}, &res)
		t.Fatalf("the agent ended with %v: %+v", n.ExitCode, res)
	}
	var res TaskResultResult
	results := s.ok("task_result", map[string]any{"instance": d.Instance, "task_id": d.TaskID}, &res)
	if res.Report == nil || !strings.Contains(*res.Report, "Done: I appended a line to notes.txt for: banana") || res.Agent != agent || res.AgentFailed {
		t.Fatalf("task_result = %+v", res)
	}
	if res.InputTokens == nil || *res.InputTokens == 0 || res.Turns == nil {
		t.Errorf("no usage in the result: %+v", res)
	}
	var status TaskStatusResult
	statuses := s.ok("task_status", map[string]any{"instance": d.Instance, "task_id": d.TaskID}, &status)
	// ISX-081: neither result has the retired turn limit.
	for _, m := range []map[string]any{results, statuses} {
		for _, retired := range []string{"max_turns", "delegate_max_turns"} {
			if _, ok := m[retired]; ok {
				t.Errorf("a result has %s: %v", retired, m)
			}
		}
	}
	if status.SessionID == "" || status.Agent != agent || status.State != TaskFinished {
		t.Errorf("task_status = %+v", status)
	}
	if agent == "claude" && status.SessionID != d.SessionID {
		t.Errorf("session %q, delegate said %q", status.SessionID, d.SessionID)
	}

	var stat GetDiffResult
	s.ok("get_diff", map[string]any{"instance": d.Instance, "task_id": d.TaskID, "stat": true}, &stat)
	if len(stat.Files) != 1 || stat.Files[0].Path != "notes.txt" || stat.Added != 1 || stat.Deleted != 0 || stat.Patch != nil {
		t.Fatalf("get_diff stat = %+v", stat)
	}
	var patch GetDiffResult
	s.ok("get_diff", map[string]any{"instance": d.Instance, "task_id": d.TaskID}, &patch)
	if patch.Patch == nil || !strings.Contains(*patch.Patch, "+edit for banana") || !strings.Contains(*patch.Patch, "b/notes.txt") {
		t.Fatalf("get_diff patch = %+v", patch)
	}

	// The follow-up resumes the same session, with the same agent.
	s.ok("send_message", map[string]any{"instance": d.Instance, "task_id": d.TaskID, "message": "cherry: what word did I give you?"}, &again)
	if again.Run != 2 || again.Agent != agent || again.SessionID != status.SessionID {
		t.Fatalf("send_message = %+v (session %s)", again, status.SessionID)
	}
	waitFinished(t, s, d.TaskID, 2, 3*time.Minute)
	s.ok("task_result", map[string]any{"instance": d.Instance, "task_id": d.TaskID}, &res)
	if res.Run != 2 || res.Report == nil || !strings.Contains(*res.Report, "cherry") {
		t.Fatalf("the follow-up's result = %+v", res)
	}
	if !w.sawConversation(agent, "banana", "cherry") {
		t.Errorf("no %s call carried the first run's conversation with the follow-up", agent)
	}
	s.ok("get_diff", map[string]any{"instance": d.Instance, "task_id": d.TaskID}, &patch)
	if patch.Patch == nil || !strings.Contains(*patch.Patch, "+edit for banana") || !strings.Contains(*patch.Patch, "+edit for cherry") {
		t.Fatalf("the second diff = %+v", patch)
	}

	// ISX-105: the proxy put in the template's claude account for Claude
	// and its openai account for Codex; the instance never had either.
	for _, c := range w.calls(agent) {
		got, want := c.Headers.Get("X-Api-Key"), w.keys[0]
		if agent == "codex" {
			got, want = c.Headers.Get("Authorization"), "Bearer "+w.keys[1]
		}
		if got != want {
			t.Errorf("a %s call arrived with %q, not the account's key", agent, got)
		}
	}
	if out := w.execIn(d.Instance, "grep -rl -e '"+w.keys[0]+"' -e '"+w.keys[1]+"' /home /etc /run /tmp 2>/dev/null; true"); out != "" {
		t.Errorf("an account key is in the instance: %s", out)
	}
	after := w.activity(t, s, d.Instance)
	if agent == "claude" && after.InputTokens <= before.InputTokens {
		t.Errorf("instance_activity input tokens %d then %d: the fake's usage was not counted", before.InputTokens, after.InputTokens)
	}
	if after.TrafficRequests <= before.TrafficRequests {
		t.Errorf("traffic requests %d then %d", before.TrafficRequests, after.TrafficRequests)
	}
}

func (w *agentWorld) activity(t *testing.T, s *session, name string) proxy.Activity {
	t.Helper()
	var a proxy.Activity
	s.ok("instance_activity", map[string]any{"instance": name}, &a)
	return a
}

func (w *agentWorld) calls(agent string) []delegatetest.Call {
	if agent == "codex" {
		return w.openai.Calls()
	}
	var out []delegatetest.Call
	for _, c := range w.anthropic.Calls() {
		if c.Path == "/v1/messages" {
			out = append(out, c)
		}
	}
	return out
}

// sawConversation reports whether one model call carried both words: the
// follow-up with the first run's conversation before it.
func (w *agentWorld) sawConversation(agent string, first, second string) bool {
	for _, c := range w.calls(agent) {
		body := string(c.Body)
		if strings.Contains(body, first) && strings.Contains(body, second) && strings.Index(body, first) < strings.LastIndex(body, second) {
			return true
		}
	}
	return false
}
