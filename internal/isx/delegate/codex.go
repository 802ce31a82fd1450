package delegate

// codexAgent is Codex: `codex exec --json`, always with approval policy
// never, in the sandbox mode mcp.yaml gives (danger-full-access by
// default). Its provider is configured in the agent's ~/.codex/config.toml
// at build time to be the host proxy's OpenAI route. thread.started names
// the thread a follow-up resumes (codex exec resume).
type codexAgent struct{}

func (codexAgent) Name() string { return Codex }

func (codexAgent) Argv(l Launch) []string {
	argv := []string{"codex", "exec"}
	if l.Resume {
		argv = append(argv, "resume")
	}
	argv = append(argv, "--json", "--skip-git-repo-check", "-c", `approval_policy="never"`)
	if l.Permission != "" {
		argv = append(argv, "-c", `sandbox_mode="`+l.Permission+`"`)
	}
	if l.Model != "" {
		argv = append(argv, "-m", l.Model)
	}
	argv = append(argv, "--")
	if l.Resume {
		argv = append(argv, l.Session)
	}
	return append(argv, l.Prompt)
}

func (codexAgent) Join(session string) []string { return []string{"codex", "resume", session} }

// Parse reads Codex's JSONL: thread.started (the thread id),
// item.completed agent_message items (the last is the report),
// turn.completed (usage, summed over the run's turns), turn.failed and
// error (a failure, such as a model the account may not use). Codex also
// prints an error event for each stream it retries ("Reconnecting... 1/5");
// a turn that completes after it recovered, so only an error no completed
// turn follows, or a failed turn, makes the run a failure.
func (codexAgent) Parse(stream []byte) Report {
	var r Report
	turns := 0
	var usage Usage
	var pending string // an error event's message no completed turn has followed yet
	lines(stream, func(_ []byte, e map[string]any) {
		kind := str(e, "type")
		switch kind {
		case "thread.started":
			r.SessionID = str(e, "thread_id")
		case "item.completed":
			item := obj(e, "item")
			switch str(item, "type") {
			case "agent_message":
				r.Text = str(item, "text")
				r.remember("agent_message: " + r.Text)
			default:
				r.remember("item " + str(item, "type") + " " + str(item, "command"))
			}
			return
		case "turn.completed":
			turns++
			u := obj(e, "usage")
			usage.InputTokens += count(u, "input_tokens")
			usage.OutputTokens += count(u, "output_tokens")
			usage.CacheReadTokens += count(u, "cached_input_tokens")
			r.Usage = &usage
			pending = ""
		case "turn.failed":
			r.Failed, r.Error = true, str(obj(e, "error"), "message")
		case "error":
			pending = str(e, "message")
		}
		r.remember(kind)
	})
	if turns > 0 {
		r.Turns = &turns
	}
	if pending != "" && !r.Failed {
		r.Failed, r.Error = true, pending
	}
	return r
}
