package delegate

import (
	"os"
	"slices"
	"strings"
	"testing"
)

func stream(t *testing.T, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// The event streams in testdata were printed by the real CLIs (Claude Code
// 2.1.332, Codex 0.171.0, Pi 0.73.1, opencode 1.18.33) against the fake
// providers of delegatetest, scripted to run one command and report (home
// and working directory rewritten to the agent user's).

// ISX-131: Claude's session, its report, turns, usage and cost.
func TestClaudeStream(t *testing.T) {
	r := Adapters[Claude].Parse(stream(t, "claude1.jsonl"))
	if r.SessionID != "11111111-2222-4333-8444-555555555556" || !strings.HasPrefix(r.Text, "REPORT for: the word is banana") || r.Failed {
		t.Fatalf("report = %+v", r)
	}
	if r.Turns == nil || *r.Turns != 2 || r.Usage == nil || r.Usage.InputTokens == 0 || r.Usage.OutputTokens == 0 || r.Cost == nil || *r.Cost <= 0 {
		t.Errorf("turns, usage, cost = %v %+v %v", r.Turns, r.Usage, r.Cost)
	}
	if len(r.Events) == 0 || !slices.ContainsFunc(r.Events, func(e string) bool { return strings.HasPrefix(e, "tool_use Bash") }) {
		t.Errorf("events = %v", r.Events)
	}
	resumed := Adapters[Claude].Parse(stream(t, "claude2.jsonl"))
	if resumed.SessionID != r.SessionID || !strings.Contains(resumed.Text, "what word did I give you?") {
		t.Errorf("the resumed run = %+v", resumed)
	}
}

// ISX-106: Codex's thread, its report and token usage.
func TestCodexStream(t *testing.T) {
	r := Adapters[Codex].Parse(stream(t, "codex1.jsonl"))
	if r.SessionID == "" || r.Text != "REPORT for: add a line to notes.txt" || r.Failed {
		t.Fatalf("report = %+v", r)
	}
	if r.Usage == nil || r.Usage.InputTokens != 1800 || r.Usage.OutputTokens != 120 || r.Usage.CacheReadTokens != 400 || r.Turns == nil || *r.Turns != 1 {
		t.Errorf("usage = %+v turns %v", r.Usage, r.Turns)
	}
	failed := Adapters[Codex].Parse([]byte(`{"type":"thread.started","thread_id":"t1"}
{"type":"turn.started"}
{"type":"error","message":"The model gpt-x does not exist or you do not have access to it."}
{"type":"turn.failed","error":{"message":"The model gpt-x does not exist or you do not have access to it."}}
`))
	if !failed.Failed || !strings.Contains(failed.Error, "gpt-x") {
		t.Errorf("a failed turn = %+v", failed)
	}
	// A stream Codex retried and the turn then completed: not a failure.
	recovered := Adapters[Codex].Parse([]byte(`{"type":"thread.started","thread_id":"t1"}
{"type":"turn.started"}
{"type":"error","message":"Reconnecting... 1/5 (stream disconnected before completion)"}
{"type":"item.completed","item":{"type":"agent_message","text":"Done"}}
{"type":"turn.completed","usage":{"input_tokens":10,"output_tokens":2}}
`))
	if recovered.Failed || recovered.Error != "" || recovered.Text != "Done" {
		t.Errorf("a turn that recovered = %+v", recovered)
	}
	// An error after the last completed turn is still one.
	late := Adapters[Codex].Parse([]byte(`{"type":"turn.started"}
{"type":"turn.completed","usage":{"input_tokens":10,"output_tokens":2}}
{"type":"error","message":"stream disconnected: retries exhausted"}
`))
	if !late.Failed || !strings.Contains(late.Error, "retries exhausted") {
		t.Errorf("an error no turn completed after = %+v", late)
	}
}

// ISX-107: Pi's session, report, turns, tokens and cost, over a turn that
// ran the command and the one that reported; its resumed run names the
// same session.
func TestPiStream(t *testing.T) {
	r := Adapters[Pi].Parse(stream(t, "pi1.jsonl"))
	if r.SessionID != "01a23206-6f4f-73b6-91ec-56c081ab276c" || r.Text != "REPORT for: pear: add a line" || r.Failed {
		t.Fatalf("report = %+v", r)
	}
	if r.Turns == nil || *r.Turns != 2 || r.Usage == nil || r.Usage.InputTokens != 2400 || r.Usage.OutputTokens != 160 || r.Cost == nil || *r.Cost <= 0 {
		t.Errorf("turns, usage, cost = %v %+v %v", r.Turns, r.Usage, r.Cost)
	}
	resumed := Adapters[Pi].Parse(stream(t, "pi2.jsonl"))
	if resumed.SessionID != r.SessionID || !strings.Contains(resumed.Text, "quince") {
		t.Errorf("the resumed run = %+v", resumed)
	}
}

// ISX-107, ISX-111: opencode's session from its first event, its report,
// turns (steps), tokens and cost.
func TestOpencodeStream(t *testing.T) {
	r := Adapters[Opencode].Parse(stream(t, "opencode1.jsonl"))
	if r.SessionID != "ses_dcdf950d1ffe1CctFilo4T0Jjn" || !strings.Contains(r.Text, "grape") || r.Failed {
		t.Fatalf("report = %+v", r)
	}
	if r.Turns == nil || *r.Turns < 1 || r.Usage == nil || r.Usage.InputTokens == 0 || r.Cost == nil || *r.Cost <= 0 {
		t.Errorf("turns, usage, cost = %v %+v %v", r.Turns, r.Usage, r.Cost)
	}
}

// ISX-079, ISX-095, ISX-098, ISX-100, ISX-102: how each agent is
// launched: full access as mcp.yaml says, never a turn limit, opencode
// with --auto, Codex with approval policy never; a follow-up resumes
// exactly the session.
func TestLaunchCommands(t *testing.T) {
	first := Launch{Prompt: "-fix it", Model: "m1", Session: "s-1", Permission: "bypassPermissions"}
	claude := Adapters[Claude].Argv(first)
	if !containsRun(claude, "--permission-mode", "bypassPermissions") || !containsRun(claude, "--session-id", "s-1") || !containsRun(claude, "--model", "m1") || !containsRun(claude, "--", "-fix it") {
		t.Errorf("claude: %q", claude)
	}
	resume := first
	resume.Resume = true
	if argv := Adapters[Claude].Argv(resume); !containsRun(argv, "--resume", "s-1") || slices.Contains(argv, "--session-id") {
		t.Errorf("claude resume: %q", argv)
	}
	codex := Adapters[Codex].Argv(Launch{Prompt: "p", Model: "gpt-5", Permission: "read-only"})
	if !containsRun(codex, "-c", `approval_policy="never"`) || !containsRun(codex, "-c", `sandbox_mode="read-only"`) || !containsRun(codex, "-m", "gpt-5") {
		t.Errorf("codex: %q", codex)
	}
	if argv := Adapters[Codex].Argv(Launch{Prompt: "p", Session: "th-1", Resume: true, Permission: "danger-full-access"}); !containsRun(argv, "exec", "resume") || !containsRun(argv, "--", "th-1", "p") {
		t.Errorf("codex resume: %q", argv)
	}
	if argv := Adapters[Opencode].Argv(Launch{Prompt: "p", Session: "ses_1", Resume: true}); !slices.Contains(argv, "--auto") || !containsRun(argv, "-s", "ses_1") {
		t.Errorf("opencode: %q", argv)
	}
	if argv := Adapters[Pi].Argv(Launch{Prompt: "p", Session: "u-1", Resume: true}); !containsRun(argv, "--mode", "json") || !containsRun(argv, "--session", "u-1") {
		t.Errorf("pi: %q", argv)
	}
	// Joining Claude hands the secret over as a bearer token, so that the
	// interactive Claude never asks about an API key; the session is an
	// argument, never shell text.
	if join := Adapters[Claude].Join("s-1"); join[0] != "/bin/sh" || join[len(join)-1] != "s-1" ||
		!strings.Contains(join[2], "ANTHROPIC_AUTH_TOKEN=$ANTHROPIC_API_KEY") || !strings.Contains(join[2], "unset ANTHROPIC_API_KEY") || strings.Contains(join[2], "s-1") {
		t.Errorf("claude join: %q", join)
	}
	for name, a := range Adapters {
		for _, arg := range a.Argv(first) {
			if strings.Contains(arg, "turns") {
				t.Errorf("%s is launched with a turn limit: %q", name, a.Argv(first))
			}
		}
	}
	// The command takes the proxy's environment, and data stays data.
	cmd := Command(Adapters[Claude], Launch{Prompt: "$(touch /tmp/x); `id`"})
	if cmd[0] != "/bin/sh" || !strings.Contains(cmd[2], ProxyProfile) || cmd[len(cmd)-1] != "$(touch /tmp/x); `id`" {
		t.Errorf("command = %q", cmd)
	}
}

func containsRun(argv []string, run ...string) bool {
	for i := 0; i+len(run) <= len(argv); i++ {
		if slices.Equal(argv[i:i+len(run)], run) {
			return true
		}
	}
	return false
}

func TestNewSessionID(t *testing.T) {
	id, err := NewSessionID(strings.NewReader(strings.Repeat("\x00", 16)))
	if err != nil || id != "00000000-0000-4000-8000-000000000000" {
		t.Errorf("id = %q, %v", id, err)
	}
	if _, err := NewSessionID(strings.NewReader("short")); err == nil {
		t.Error("a short random source gave an id")
	}
}
