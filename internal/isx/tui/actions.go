package tui

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"

	"github.com/incusspawn/isx/internal/isx/build"
	"github.com/incusspawn/isx/internal/isx/holding"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
)

// doneMsg is the outcome of an action.
type doneMsg struct {
	name string // the instance or template acted on
	text string // what the isx command would have printed
	err  error
	// after, when set, runs on the model once the outcome is shown.
	after func(*model)
}

// buildLineMsg is one progress line of the build under way.
type buildLineMsg string

// maxBuildLines is how many progress lines the TUI keeps.
const maxBuildLines = 200

// act runs an action on name in the background; busy says what is under
// way meanwhile ("stopping").
func (m *model) act(name, busy string, f func(ctx context.Context) (string, error), after func(*model)) {
	if what, ok := m.busy[name]; ok {
		m.say(fmt.Sprintf("%s is %s already; wait for that to end.", name, what), true)
		return
	}
	m.busy[name] = busy
	m.say(fmt.Sprintf("%s %s…", capitalise(busy), name), false)
	m.rt.spawn(func(ctx context.Context) tea.Msg {
		text, err := f(ctx)
		return doneMsg{name: name, text: text, err: err, after: after}
	})
}

func (m *model) done(msg doneMsg) tea.Cmd {
	delete(m.busy, msg.name)
	if msg.name == m.building {
		m.building = ""
	}
	switch {
	case msg.err != nil:
		m.say(firstLine(msg.err.Error()), true)
		var step *build.StepError
		if errors.As(msg.err, &step) {
			m.buildFailed = true
			for line := range strings.Lines(step.Output()) {
				m.buildLines = append(m.buildLines, strings.TrimRight(line, "\n"))
			}
		}
	default:
		m.say(strings.Join(strings.Fields(msg.text), " "), false)
	}
	if msg.after != nil {
		msg.after(m)
	}
	// Events say what changed, but not when Incus is away or the change
	// was on the host only (a shell's record): read again to be sure.
	m.refresh()
	return nil
}

func (m *model) templateAction(msg tea.KeyPressMsg, name string) tea.Cmd {
	if name == "" {
		return nil
	}
	switch {
	case key.Matches(msg, m.keys.Branch):
		t := m.template(name)
		if t == nil || !strings.HasPrefix(t.Status, "built") && t.Status != "stale" {
			m.say(fmt.Sprintf("%s is not built; press r to build it first.", name), true)
			return nil
		}
		m.prompt = newBranchPrompt(name, m.st)
		return m.prompt.name.Focus()
	case key.Matches(msg, m.keys.Build):
		m.startBuild(name)
	}
	return nil
}

func (m *model) startBuild(name string) {
	if m.building != "" {
		m.say(fmt.Sprintf("%s is being built; one build at a time.", m.building), true)
		return
	}
	m.building, m.buildLines, m.buildFailed = name, nil, false
	progress := &lineWriter{send: func(line string) { m.rt.send(buildLineMsg(line)) }}
	actions := m.opts.Actions
	m.act(name, "building", func(ctx context.Context) (string, error) {
		text, err := actions.Build(ctx, name, progress)
		progress.flush()
		return text, err
	}, func(m *model) {
		if !m.buildFailed {
			m.buildLines = nil
		}
	})
}

func (m *model) instanceAction(msg tea.KeyPressMsg, name string) tea.Cmd {
	if name == "" {
		return nil
	}
	actions := m.opts.Actions
	switch {
	case key.Matches(msg, m.keys.Shell):
		return m.shell(name, "")
	case key.Matches(msg, m.keys.Start):
		m.act(name, "starting", func(ctx context.Context) (string, error) { return actions.Start(ctx, name) }, nil)
	case key.Matches(msg, m.keys.Stop):
		m.act(name, "stopping", func(ctx context.Context) (string, error) { return actions.Stop(ctx, name) }, nil)
	case key.Matches(msg, m.keys.Destroy):
		if e := m.entry(name); e != nil {
			m.confirm = &destroyConfirm{name: name, warning: m.destroyWarning(e)}
		}
	}
	return nil
}

// shell hands the terminal to `isx shell` and takes it back after.
func (m *model) shell(name, taskID string) tea.Cmd {
	if what, ok := m.busy[name]; ok {
		m.say(fmt.Sprintf("%s is %s; wait for that to end.", name, what), true)
		return nil
	}
	actions := m.opts.Actions
	run := &shellRun{ctx: m.rt.ctx, run: func(ctx context.Context, stdout, stderr io.Writer) error {
		return actions.Shell(ctx, name, taskID, stdout, stderr)
	}}
	return tea.Exec(run, func(err error) tea.Msg {
		text := fmt.Sprintf("Left the shell in %s.", name)
		if taskID != "" {
			text = fmt.Sprintf("Left task %s in %s.", taskID, name)
		}
		return doneMsg{name: name, text: text, err: err}
	})
}

// shellRun is `isx shell` as Bubble Tea runs a program on its terminal.
type shellRun struct {
	ctx            context.Context
	run            func(ctx context.Context, stdout, stderr io.Writer) error
	stdout, stderr io.Writer
}

func (s *shellRun) Run() error            { return s.run(s.ctx, s.stdout, s.stderr) }
func (s *shellRun) SetStdin(io.Reader)    {} // isx shell reads the terminal itself
func (s *shellRun) SetStdout(w io.Writer) { s.stdout = w }
func (s *shellRun) SetStderr(w io.Writer) { s.stderr = w }

func (m *model) destroyWarning(e *instance.Entry) string {
	mcp := e.Stamps.MCP
	switch {
	case mcp.Kept != "":
		return "isx mcp handed it to you (kept)."
	case mcp.Session != "" && mcp.Orphaned == "" && holding.SessionAlive(mcp.Session):
		return fmt.Sprintf("A live isx mcp session holds it (%s); its agent loses the instance.", mcp.Label())
	case mcp.Owner != "":
		return "It is an orphan of an ended isx mcp session."
	}
	return ""
}

// branchPrompt asks for the new instance's name and network.
type branchPrompt struct {
	from    string
	name    textinput.Model
	network int // index into instance.Networks
	problem string
}

func newBranchPrompt(from string, st styles) *branchPrompt {
	name := st.textInput("")
	name.Placeholder = "name"
	name.CharLimit = 63
	return &branchPrompt{from: from, name: name}
}

func (m *model) promptKey(msg tea.KeyPressMsg) tea.Cmd {
	p := m.prompt
	switch msg.String() {
	case "esc":
		m.prompt = nil
		return nil
	case "tab":
		p.network = (p.network + 1) % len(instance.Networks)
		return nil
	case "shift+tab":
		p.network = (p.network + len(instance.Networks) - 1) % len(instance.Networks)
		return nil
	case "enter":
		name := strings.TrimSpace(p.name.Value())
		if err := incus.ValidateInstanceName(name); err != nil {
			p.problem = err.Error()
			return nil
		}
		m.prompt = nil
		from, network := p.from, instance.Networks[p.network]
		actions := m.opts.Actions
		m.act(name, "branching", func(ctx context.Context) (string, error) {
			return actions.Branch(ctx, name, from, network)
		}, func(m *model) {
			if !m.messageBad {
				m.sel[paneInstances].name, m.pane = name, paneInstances
			}
		})
		return nil
	}
	var cmd tea.Cmd
	p.name, cmd = p.name.Update(msg)
	p.problem = ""
	return cmd
}

// destroyConfirm asks before destroying.
type destroyConfirm struct {
	name    string
	warning string
}

func (m *model) confirmKey(msg tea.KeyPressMsg) tea.Cmd {
	name := m.confirm.name
	m.confirm = nil
	if !key.Matches(msg, m.keys.Yes) {
		m.say(fmt.Sprintf("Kept %s.", name), false)
		return nil
	}
	actions := m.opts.Actions
	m.act(name, "destroying", func(ctx context.Context) (string, error) { return actions.Destroy(ctx, name) }, nil)
	return nil
}

// lineWriter turns written progress into one message per line.
type lineWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	send func(line string)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil {
			w.buf.WriteString(line) // no newline yet: keep it for later
			return len(p), nil
		}
		w.send(strings.TrimRight(line, "\n"))
	}
}

func (w *lineWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buf.Len() > 0 {
		w.send(w.buf.String())
		w.buf.Reset()
	}
}

func capitalise(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}
