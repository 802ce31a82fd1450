// Package delegate knows the coding agents isx mcp delegates to inside an
// instance: Claude Code, Codex, Pi and opencode. One small adapter per
// agent, a file each, says how to launch it headless with full access
// inside the instance, how to resume exactly one of its sessions, how a
// person joins that session, and how to read its event stream: the
// session id, and the report it ends with (text, turns, tokens, cost).
//
// It runs nothing itself: the task package runs the commands as a task's
// runs, and isx mcp reads the streams back. Every agent reaches its model
// only through the host proxy, with the environment the proxy writes into
// the instance at each start (ProxyProfile), so no credential is ever in a
// command line, a record or the instance.
package delegate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/incusspawn/isx/internal/coded"
)

// Agent names, as templates' tools and delegate's agent argument name them.
const (
	Claude   = "claude"
	Codex    = "codex"
	Pi       = "pi"
	Opencode = "opencode"
)

// ProxyProfile is the script the host proxy writes into every instance at
// each start: sourced, it exports the environment an agent needs to reach
// everything through the proxy with that start's secret.
const ProxyProfile = "/etc/profile.d/isx-proxy.sh"

// Launch is what a run of an agent is given.
type Launch struct {
	// Prompt is the instruction of a first run, or the message of a
	// follow-up.
	Prompt string
	// Model is the task's model: its override, or the template's.
	Model string
	// Session is the agent's session to resume; empty for a first run.
	// For Claude a first run is given it too: isx chooses Claude's
	// session id (NewSessionID), so it is known before the agent starts.
	Session string
	// Resume says the run continues Session rather than starting it.
	Resume bool
	// Permission is Claude's permission mode or Codex's sandbox mode.
	Permission string
}

// Adapter is one agent.
type Adapter interface {
	// Name is the agent's name (Claude, Codex, Pi, Opencode).
	Name() string
	// Argv is the agent's headless command line for a run, without the
	// environment (Command adds that).
	Argv(l Launch) []string
	// Join is the interactive command a person runs to join the session.
	Join(session string) []string
	// Parse reads the agent's event stream (stdout of a run).
	Parse(stream []byte) Report
}

// Adapters are the agents isx can delegate to, by name.
var Adapters = map[string]Adapter{
	Claude:   claudeAgent{},
	Codex:    codexAgent{},
	Pi:       piAgent{},
	Opencode: opencodeAgent{},
}

// Of is the adapter of a named agent.
func Of(name string) (Adapter, error) {
	a, ok := Adapters[name]
	if !ok {
		return nil, coded.New(CodeUnknownAgent, "unknown agent %q: use claude, codex, pi or opencode", name)
	}
	return a, nil
}

// CodeUnknownAgent: an agent isx does not know.
const CodeUnknownAgent = "unknown_agent"

// Command is the argv a task run executes: a shell that takes the
// proxy's environment of this start (the secret changes at every start,
// which ends every agent anyway) and then becomes the agent. Data reaches
// the shell only as positional parameters, never as its text.
func Command(a Adapter, l Launch) []string {
	return append([]string{"/bin/sh", "-c", `[ -r ` + ProxyProfile + ` ] && . ` + ProxyProfile + `; exec "$@"`, "isx-" + a.Name()}, a.Argv(l)...)
}

// JoinCommand is Join run the same way, for isx shell --task.
func JoinCommand(a Adapter, session string) []string {
	return append([]string{"/bin/sh", "-c", `[ -r ` + ProxyProfile + ` ] && . ` + ProxyProfile + `; exec "$@"`, "isx-" + a.Name()}, a.Join(session)...)
}

// Report is what a run's event stream says.
type Report struct {
	// SessionID is the agent's session, once the stream names it (for
	// Pi, once Pi has saved it).
	SessionID string
	// Text is the agent's final answer: its report.
	Text string
	// Failed says the agent reported a failure (a model it may not use,
	// an API error); Error says what.
	Failed bool
	Error  string
	// Turns, tokens and cost, where the agent reports them.
	Turns *int
	Usage *Usage
	Cost  *float64
	// Events are the last few events, one short line each.
	Events []string
}

// Usage is the tokens an agent reports for a run.
type Usage struct {
	InputTokens         int64 `json:"input_tokens"`
	OutputTokens        int64 `json:"output_tokens"`
	CacheReadTokens     int64 `json:"cache_read_input_tokens,omitempty"`
	CacheCreationTokens int64 `json:"cache_creation_input_tokens,omitempty"`
}

// maxEvents is how many recent events a Report keeps.
const maxEvents = 12

// lines calls each for every JSON object line of stream; other lines
// (a CLI's warnings) are skipped. A line cut short at the start of a tail
// is skipped too.
func lines(stream []byte, each func(raw []byte, event map[string]any)) {
	scanner := bufio.NewScanner(bytes.NewReader(stream))
	scanner.Buffer(make([]byte, 64<<10), 16<<20)
	for scanner.Scan() {
		line := bytes.TrimSpace(scanner.Bytes())
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var event map[string]any
		if json.Unmarshal(line, &event) != nil {
			continue
		}
		each(line, event)
	}
}

// remember keeps a short line for an event.
func (r *Report) remember(line string) {
	r.Events = append(r.Events, clip(line, 200))
	if len(r.Events) > maxEvents {
		r.Events = r.Events[len(r.Events)-maxEvents:]
	}
}

func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

func obj(m map[string]any, key string) map[string]any {
	o, _ := m[key].(map[string]any)
	return o
}

func num(m map[string]any, key string) (float64, bool) {
	f, ok := m[key].(float64)
	return f, ok
}

func count(m map[string]any, key string) int64 {
	f, _ := num(m, key)
	return int64(f)
}

func clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// ReadAll reads a stream for Parse, bounded.
func ReadAll(r io.Reader, limit int64) ([]byte, error) {
	raw, err := io.ReadAll(io.LimitReader(r, limit))
	if err != nil {
		return nil, fmt.Errorf("delegate: reading an event stream: %w", err)
	}
	return raw, nil
}
