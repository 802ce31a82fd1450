package delegate

// piAgent is Pi (the pi coding agent): `pi -p --mode json`, full access
// (Pi has no permission prompts). It names its session in a session
// event, but a session exists to resume only once Pi has saved it, which
// isx checks in the instance before a follow-up (Saved).
type piAgent struct{}

func (piAgent) Name() string { return Pi }

func (piAgent) Argv(l Launch) []string {
	argv := []string{"pi", "-p", "--mode", "json"}
	if l.Model != "" {
		argv = append(argv, "--model", l.Model)
	}
	if l.Resume {
		argv = append(argv, "--session", l.Session)
	}
	return append(argv, l.Prompt)
}

func (piAgent) Join(session string) []string { return []string{"pi", "--session", session} }

// SessionFiles is where Pi saves a session: once a file matches, the
// session can be resumed; until then, or once it is gone, it cannot.
func (piAgent) SessionFiles(session string) string {
	return "/home/agent/.pi/agent/sessions/*/*_" + session + ".jsonl"
}

// Saver is an agent whose session exists to resume only once saved.
type Saver interface {
	SessionFiles(session string) string
}

// Parse reads Pi's JSON events: session (its id), turn_end (a turn),
// message_end of the assistant (text, usage and cost), agent_end.
func (piAgent) Parse(stream []byte) Report {
	var r Report
	turns := 0
	var usage Usage
	cost := 0.0
	costSeen := false
	lines(stream, func(_ []byte, e map[string]any) {
		kind := str(e, "type")
		switch kind {
		case "session":
			r.SessionID = str(e, "id")
		case "turn_end":
			turns++
		case "message_end":
			msg := obj(e, "message")
			if str(msg, "role") != "assistant" {
				break
			}
			if text := messageText(msg); text != "" {
				r.Text = text
			}
			if str(msg, "stopReason") == "error" {
				r.Failed, r.Error = true, str(msg, "errorMessage")
			}
			if u := obj(msg, "usage"); u != nil {
				usage.InputTokens += count(u, "input")
				usage.OutputTokens += count(u, "output")
				usage.CacheReadTokens += count(u, "cacheRead")
				usage.CacheCreationTokens += count(u, "cacheWrite")
				r.Usage = &usage
				if c := obj(u, "cost"); c != nil {
					if total, ok := num(c, "total"); ok {
						cost += total
						costSeen = true
					}
				}
			}
		}
		r.remember(kind)
	})
	r.Turns = &turns
	if costSeen {
		r.Cost = &cost
	}
	return r
}

// messageText joins the text parts of a message's content.
func messageText(msg map[string]any) string {
	if s, ok := msg["content"].(string); ok {
		return s
	}
	parts, _ := msg["content"].([]any)
	text := ""
	for _, p := range parts {
		part, _ := p.(map[string]any)
		if str(part, "type") == "text" {
			text += str(part, "text")
		}
	}
	return text
}
