package delegate

// opencodeAgent is opencode: `opencode run --format json --auto`, full
// access. Its first event names the session, which a follow-up resumes
// with -s; a session opencode no longer has fails that run, and opens no
// new one.
type opencodeAgent struct{}

func (opencodeAgent) Name() string { return Opencode }

func (opencodeAgent) Argv(l Launch) []string {
	argv := []string{"opencode", "run", "--format", "json", "--auto"}
	if l.Model != "" {
		argv = append(argv, "-m", l.Model)
	}
	if l.Resume {
		argv = append(argv, "-s", l.Session)
	}
	return append(argv, "--", l.Prompt)
}

func (opencodeAgent) Join(session string) []string { return []string{"opencode", "-s", session} }

// Parse reads opencode's JSON events: each names its sessionID (the first
// one is the task's session); text parts are the report, step_finish
// parts carry tokens and cost, error events a failure.
func (opencodeAgent) Parse(stream []byte) Report {
	var r Report
	turns := 0
	var usage Usage
	cost := 0.0
	costSeen := false
	lines(stream, func(_ []byte, e map[string]any) {
		kind := str(e, "type")
		if id := str(e, "sessionID"); id != "" && r.SessionID == "" {
			r.SessionID = id
		}
		part := obj(e, "part")
		switch kind {
		case "text":
			if text := str(part, "text"); text != "" {
				r.Text = text
			}
		case "step_finish":
			turns++
			if t := obj(part, "tokens"); t != nil {
				usage.InputTokens += count(t, "input")
				usage.OutputTokens += count(t, "output")
				cache := obj(t, "cache")
				usage.CacheReadTokens += count(cache, "read")
				usage.CacheCreationTokens += count(cache, "write")
				r.Usage = &usage
			}
			if c, ok := num(part, "cost"); ok {
				cost += c
				costSeen = true
			}
		case "error":
			r.Failed = true
			errObj := obj(e, "error")
			r.Error = firstOf(str(obj(errObj, "data"), "message"), str(errObj, "name"), str(e, "message"))
		}
		r.remember(kind)
	})
	r.Turns = &turns
	if costSeen {
		r.Cost = &cost
	}
	return r
}
