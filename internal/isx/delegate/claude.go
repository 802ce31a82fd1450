package delegate

import (
	"fmt"
	"io"
)

// claudeAgent is Claude Code: `claude -p` with stream-json output. isx
// chooses the session id of a first run (--session-id), so the task knows
// it before Claude starts; a follow-up resumes it (--resume). The
// permission mode comes from mcp.yaml (bypassPermissions by default: full
// access inside the instance); there is never a turn limit.
type claudeAgent struct{}

func (claudeAgent) Name() string { return Claude }

func (claudeAgent) Argv(l Launch) []string {
	argv := []string{"claude", "-p", "--output-format", "stream-json", "--verbose"}
	if l.Permission != "" {
		argv = append(argv, "--permission-mode", l.Permission)
	}
	if l.Model != "" {
		argv = append(argv, "--model", l.Model)
	}
	if l.Resume {
		argv = append(argv, "--resume", l.Session)
	} else if l.Session != "" {
		argv = append(argv, "--session-id", l.Session)
	}
	return append(argv, "--", l.Prompt)
}

// Join resumes the session interactively. Interactive Claude Code asks
// whether to use an ANTHROPIC_API_KEY it finds in the environment, and
// suggests No, which would leave the person signed out; the instance
// secret changes with every start, so no approval can be written ahead.
// It goes as ANTHROPIC_AUTH_TOKEN instead (a bearer token, which Claude
// uses without asking, and which the proxy accepts as it does the key).
func (claudeAgent) Join(session string) []string {
	return []string{"/bin/sh", "-c", claudeJoinScript, "isx-claude-join", session}
}

const claudeJoinScript = `[ -n "${ANTHROPIC_API_KEY-}" ] && { ANTHROPIC_AUTH_TOKEN=$ANTHROPIC_API_KEY; export ANTHROPIC_AUTH_TOKEN; unset ANTHROPIC_API_KEY; }
exec claude --resume "$1"`

// Parse reads stream-json: the system init event names the session, the
// result event ends the run with the report, its turns, usage and cost.
func (claudeAgent) Parse(stream []byte) Report {
	var r Report
	lines(stream, func(_ []byte, e map[string]any) {
		kind := str(e, "type")
		if id := str(e, "session_id"); id != "" {
			r.SessionID = id
		}
		switch kind {
		case "system":
			r.remember("system " + str(e, "subtype") + " model " + str(e, "model"))
		case "assistant":
			msg := obj(e, "message")
			content, _ := msg["content"].([]any)
			for _, c := range content {
				block, _ := c.(map[string]any)
				switch str(block, "type") {
				case "text":
					r.remember("assistant: " + str(block, "text"))
				case "tool_use":
					r.remember("tool_use " + str(block, "name"))
				}
			}
		case "result":
			r.Text = str(e, "result")
			isError, _ := e["is_error"].(bool)
			if isError || (str(e, "subtype") != "" && str(e, "subtype") != "success") {
				r.Failed, r.Error = true, firstOf(str(e, "result"), str(e, "subtype"))
			}
			if turns, ok := num(e, "num_turns"); ok {
				n := int(turns)
				r.Turns = &n
			}
			if cost, ok := num(e, "total_cost_usd"); ok {
				r.Cost = &cost
			}
			if u := obj(e, "usage"); u != nil {
				r.Usage = &Usage{
					InputTokens: count(u, "input_tokens"), OutputTokens: count(u, "output_tokens"),
					CacheReadTokens: count(u, "cache_read_input_tokens"), CacheCreationTokens: count(u, "cache_creation_input_tokens"),
				}
			}
			r.remember("result " + str(e, "subtype"))
		}
	})
	return r
}

func firstOf(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}

// NewSessionID draws a random (version 4) UUID for a Claude session.
func NewSessionID(random io.Reader) (string, error) {
	b := make([]byte, 16)
	if _, err := io.ReadFull(random, b); err != nil {
		return "", fmt.Errorf("delegate: drawing a session id: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}
