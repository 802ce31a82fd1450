package tui

import (
	"context"
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/ansi"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/task"
)

// These tests drive the model with messages, as Bubble Tea would, and
// read what it draws. Nothing here talks to Incus: the tmux tests in
// cmd/isx run the real binary against the real daemon. The fakes below
// are the seams for what these tests need not reach.

// noIncus answers nothing: a model under test that reaches for Incus
// gets an error.
type noIncus struct{}

var errNoIncus = errors.New("no Incus in this test")

func (noIncus) Exec(context.Context, string, incus.ExecRequest) (*incus.ExecResult, error) {
	return nil, errNoIncus
}
func (noIncus) Events(context.Context, ...string) (*incus.EventStream, error) { return nil, errNoIncus }
func (noIncus) ProjectName() string                                           { return "p" }

type fixedLister struct{ listing *Listing }

func (l fixedLister) Listing(context.Context) (*Listing, error) { return l.listing, nil }

type noActions struct{}

func (noActions) Branch(context.Context, string, string, instance.Network) (string, error) {
	return "", errNoIncus
}
func (noActions) Build(context.Context, string, io.Writer) (string, error) { return "", errNoIncus }
func (noActions) Start(context.Context, string) (string, error)            { return "", errNoIncus }
func (noActions) Stop(context.Context, string) (string, error)             { return "", errNoIncus }
func (noActions) Destroy(context.Context, string) (string, error)          { return "", errNoIncus }
func (noActions) Shell(context.Context, string, string, io.Writer, io.Writer) error {
	return errNoIncus
}

// someProxy stands for the host proxy, which does not exist yet: the
// model only needs to know there is one; readings come as messages.
type someProxy struct{}

func (someProxy) Watch(context.Context) (<-chan map[string]Activity, error) { return nil, errNoIncus }

var start = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// testModel is a model sized width×height on a fake clock. Messages its
// runtime sends are dropped: the test feeds the ones it means.
func testModel(t *testing.T, width, height int, activities Activities) (*model, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(start)
	ctx, cancel := context.WithCancel(context.Background())
	rt := newRuntime(ctx)
	rt.send = func(tea.Msg) {}
	t.Cleanup(func() { cancel(); rt.wg.Wait() })
	m := newModel(Options{
		Incus: noIncus{}, Lister: fixedLister{}, Actions: noActions{}, Activities: activities,
		Clock: clk, Home: t.TempDir(), Owner: "alice",
	}, rt)
	m.Update(tea.WindowSizeMsg{Width: width, Height: height})
	return m, clk
}

func entry(name, status string, config map[string]string) instance.Entry {
	full := map[string]string{
		instance.KeyType: instance.TypeInstance, instance.KeyTemplate: "tpl-test",
		instance.KeyCreated: instance.FormatTime(start.Add(-time.Hour)), instance.KeyNetwork: "default",
	}
	for k, v := range config {
		full[k] = v
	}
	inst := &incus.Instance{Name: name, Status: status, Config: full}
	return instance.Entry{Name: name, Status: status, Stamps: instance.ParseStamps(full), Instance: inst}
}

func listing(entries ...instance.Entry) *Listing {
	return &Listing{
		Templates: []Template{{Name: "tpl-test", Source: "user", Status: "built", Tools: []string{"claude"}}},
		Instances: entries,
	}
}

func press(m *model, keys ...string) {
	codes := map[string]rune{
		"down": tea.KeyDown, "up": tea.KeyUp, "f1": tea.KeyF1, "f3": tea.KeyF3, "f4": tea.KeyF4,
		"esc": tea.KeyEscape, "enter": tea.KeyEnter,
	}
	for _, k := range keys {
		msg := tea.KeyPressMsg{Code: []rune(k)[0], Text: k}
		if code, ok := codes[k]; ok {
			msg = tea.KeyPressMsg{Code: code}
		}
		m.Update(msg)
	}
}

// The cursor stays on its row when the list changes, and lands on the row
// that took its place when its own goes.
func TestSelectionFollowsRows(t *testing.T) {
	m, _ := testModel(t, 80, 24, nil)
	m.Update(listingMsg{listing: listing(entry("a", "Running", nil), entry("b", "Running", nil), entry("c", "Stopped", nil))})
	press(m, "down")
	if got := selectedLine(m.render()); !strings.HasPrefix(got, "b ") {
		t.Fatalf("after one down the cursor is on %q", got)
	}
	m.Update(listingMsg{listing: listing(entry("0", "Running", nil), entry("a", "Running", nil), entry("b", "Running", nil), entry("c", "Stopped", nil))})
	if got := selectedLine(m.render()); !strings.HasPrefix(got, "b ") {
		t.Errorf("after a row was added above, the cursor is on %q", got)
	}
	m.Update(listingMsg{listing: listing(entry("0", "Running", nil), entry("a", "Running", nil), entry("c", "Stopped", nil))})
	if got := selectedLine(m.render()); !strings.HasPrefix(got, "c ") {
		t.Errorf("after b went, the cursor is on %q, want c", got)
	}
	m.Update(listingMsg{listing: listing(entry("0", "Running", nil))})
	if got := selectedLine(m.render()); !strings.HasPrefix(got, "0 ") {
		t.Errorf("after c went, the cursor is on %q, want 0", got)
	}
	// With none left, the focus goes to the templates, where b branches.
	m.Update(listingMsg{listing: listing()})
	if view := m.render(); !strings.HasPrefix(selectedLine(view), "tpl-test ") || !strings.Contains(view, "No instances") || !strings.Contains(ansi.Strip(view), "b branch") {
		t.Errorf("with no instances left:\n%s", view)
	}
}

func selectedLine(view string) string {
	for _, line := range strings.Split(view, "\n") {
		if rest, ok := strings.CutPrefix(ansi.Strip(line), marker); ok {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}

// The filter narrows both lists to the rows that contain what was typed;
// esc drops it.
func TestFilter(t *testing.T) {
	m, _ := testModel(t, 80, 24, nil)
	m.Update(listingMsg{listing: listing(entry("web-1", "Running", nil), entry("db-1", "Stopped", nil), entry("web-2", "Stopped", nil))})
	press(m, "/", "w", "e", "b", "enter")
	view := m.render()
	if strings.Contains(view, "db-1") || !strings.Contains(view, "web-1") || !strings.Contains(view, "web-2") {
		t.Errorf("filtered on web:\n%s", view)
	}
	if !strings.Contains(view, "No template matches the filter.") || !strings.Contains(view, `filter “web”`) {
		t.Errorf("the filter is not shown:\n%s", view)
	}
	press(m, "esc")
	if view := m.render(); !strings.Contains(view, "db-1") {
		t.Errorf("esc did not drop the filter:\n%s", view)
	}
}

// Every view fills the screen exactly, never wider than it, down to tiny
// terminals.
func TestViewsFitTheScreen(t *testing.T) {
	long := entry("mcp-a-template-with-a-long-name-a-long-hint-abcde", "Running", map[string]string{
		instance.KeyMCPOwner: "alice", instance.KeyMCPSession: "stdio:1:1", instance.KeyMCPPurpose: strings.Repeat("purpose ", 25),
		instance.KeyTemplate: "tpl-a-template-with-a-long-name",
	})
	for _, size := range [][2]int{{80, 24}, {160, 48}, {50, 12}, {20, 6}} {
		m, _ := testModel(t, size[0], size[1], nil)
		m.Update(listingMsg{listing: listing(long, entry("w1", "Stopped", nil))})
		for _, keys := range [][]string{nil, {"f3"}, {"esc", "f4"}, {"f1"}} {
			press(m, keys...)
			lines := strings.Split(m.render(), "\n")
			if len(lines) != size[1] {
				t.Errorf("%dx%d after %v: %d lines", size[0], size[1], keys, len(lines))
			}
			for _, line := range lines {
				if w := ansi.StringWidth(line); w > size[0] {
					t.Errorf("%dx%d after %v: a line %d wide: %q", size[0], size[1], keys, w, ansi.Strip(line))
				}
			}
		}
	}
}

// Brought down to no colour (NO_COLOR, as Bubble Tea does for the
// terminal), the screen has no colour left and the cursor's row is still
// marked; as drawn, it has colours.
func TestNoColour(t *testing.T) {
	m, _ := testModel(t, 80, 24, nil)
	m.Update(listingMsg{listing: listing(entry("w1", "Running", nil))})
	view := m.render()
	if !colour.MatchString(view) {
		t.Errorf("the screen has no colour as drawn:\n%q", view)
	}
	var plain strings.Builder
	w := &colorprofile.Writer{Forward: &plain, Profile: colorprofile.Detect(io.Discard, []string{"NO_COLOR=1", "TERM=xterm-256color"})}
	if _, err := io.WriteString(w, view); err != nil {
		t.Fatal(err)
	}
	if seq := colour.FindString(plain.String()); seq != "" {
		t.Errorf("with NO_COLOR the screen has colour %q", seq)
	}
	if !strings.HasPrefix(selectedLine(plain.String()), "w1 ") {
		t.Errorf("with NO_COLOR the cursor's row is not marked:\n%s", plain.String())
	}
}

// colour matches an SGR sequence that sets a colour.
var colour = regexp.MustCompile(`\x1b\[[0-9;]*\b(3[0-9]|9[0-7]|4[0-9]|10[0-7])[;m]`)

// A running task whose instance has gone StuckAfter without a model call
// is marked possibly stuck in mission control, and only then: its idle
// time grows on the clock between the proxy's readings.
func TestMissionMarksStuckTasks(t *testing.T) {
	m, clk := testModel(t, 160, 24, someProxy{})
	held := entry("mcp-test-work-abcde", "Running", map[string]string{
		instance.KeyMCPOwner: "alice", instance.KeyMCPSession: "stdio:1:1", instance.KeyMCPPurpose: "#1",
	})
	busy := entry("mcp-test-busy-fghij", "Running", map[string]string{instance.KeyMCPOwner: "alice", instance.KeyMCPSession: "stdio:1:1"})
	other := entry("mcp-test-bob-klmno", "Running", map[string]string{instance.KeyMCPOwner: "bob", instance.KeyMCPSession: "stdio:2:2"})
	m.Update(listingMsg{listing: listing(held, busy, other)})
	running := func(id string) task.Info {
		return task.Info{ID: id, State: task.StateRunning, Run: 1, Started: start.Add(-time.Hour),
			Record: &task.Record{ID: id, Kind: task.KindDelegate, Delegate: &task.Delegate{Agent: "claude", Model: "opus"}}}
	}
	for _, e := range []instance.Entry{held, busy} {
		id := "t-aaaaaaaaa" + string(e.Name[9])
		m.Update(tasksMsg{instance: e.Name, fingerprint: fingerprint(&e), infos: []task.Info{running(id)}})
	}
	m.Update(activityMsg{at: clk.Now(), counts: map[string]Activity{
		held.Name: {CountingSince: start.Add(-2 * time.Hour), InputTokens: 12000, OutputTokens: 300, Requests: 40, IdleSeconds: 200},
		busy.Name: {Requests: 3, RequestsInFlight: 1},
	}})
	press(m, "f4")
	view := m.render()
	if strings.Contains(lineWith(view, held.Name), "stuck?") || strings.Contains(view, other.Name) {
		t.Errorf("too early for stuck, and bob's instance is not alice's:\n%s", view)
	}
	if !strings.Contains(view, "12.3k") || !strings.Contains(view, "claude") || !strings.Contains(view, "opus") {
		t.Errorf("tokens, agent and model:\n%s", view)
	}
	clk.Advance(2 * time.Minute)
	view = m.render()
	line := lineWith(view, held.Name)
	if !strings.Contains(line, "5m stuck?") {
		t.Errorf("idle 320 s is not marked stuck: %q\n%s", line, view)
	}
	if line := lineWith(view, busy.Name); strings.Contains(line, "stuck?") || !strings.Contains(line, " 1 ") {
		t.Errorf("a call in flight is work, not idleness: %q", line)
	}
}

func lineWith(view, text string) string {
	for _, line := range strings.Split(view, "\n") {
		if strings.Contains(line, text) {
			return ansi.Strip(line)
		}
	}
	return ""
}

// Without a proxy the activity columns are not drawn and the screen says
// there is none.
func TestMissionWithoutProxy(t *testing.T) {
	m, _ := testModel(t, 80, 24, nil)
	m.Update(listingMsg{listing: listing(entry("mcp-test-work-abcde", "Stopped", map[string]string{instance.KeyMCPOwner: "alice", instance.KeyMCPSession: "stdio:1:1"}))})
	press(m, "f4")
	view := m.render()
	if !strings.Contains(view, "Activity: no proxy") || strings.Contains(view, "TOKENS") {
		t.Errorf("mission control without a proxy:\n%s", view)
	}
	if line := lineWith(view, "mcp-test-work-abcde"); !strings.Contains(line, "stopped") {
		t.Errorf("a stopped instance's row: %q", line)
	}
}

// Progress written in pieces comes out one line at a time.
func TestLineWriter(t *testing.T) {
	var lines []string
	w := &lineWriter{send: func(line string) { lines = append(lines, line) }}
	for _, piece := range []string{"==> [1/1] tpl", "\n    making", " it\n    st", "ep\n", "last"} {
		if _, err := w.Write([]byte(piece)); err != nil {
			t.Fatal(err)
		}
	}
	w.flush()
	want := []string{"==> [1/1] tpl", "    making it", "    step", "last"}
	if strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Errorf("lines %q, want %q", lines, want)
	}
}

// layout cuts the widest shrinkable column first and never the fixed
// ones; cells are padded or cut with an ellipsis to their width.
func TestLayout(t *testing.T) {
	cols := []column{{title: "NAME", min: 4}, {title: "STATE"}, {title: "TEMPLATE", min: 4}}
	rows := [][]string{{"a-very-long-name", "running", "tpl-x"}}
	widths := layout(cols, rows, 30, 2)
	if widths[1] != 7 || widths[0]+widths[1]+widths[2]+4 != 30 || widths[0] < widths[2] {
		t.Errorf("widths %v", widths)
	}
	if got := cells(rows[0], widths, 2); ansi.StringWidth(got) > 30 || !strings.Contains(got, "…") {
		t.Errorf("cells %q", got)
	}
	if got := layout(cols, rows, 8, 2); got[1] != 7 || got[0] != 4 || got[2] != 4 {
		t.Errorf("a table too wide to fit keeps the minimums: %v", got)
	}
}

// A failed read of an instance's tasks is tried again rewatchAfter later,
// on the clock, so that a task never shows running for ever; what was read
// before stays on screen meanwhile. A stopped instance is not retried.
func TestTasksAreReadAgainAfterAFailure(t *testing.T) {
	m, clk := testModel(t, 80, 24, nil)
	sent := make(chan tea.Msg, 16)
	m.rt.send = func(msg tea.Msg) { sent <- msg }
	held := entry("mcp-test-work-abcde", "Running", map[string]string{instance.KeyMCPOwner: "alice", instance.KeyMCPSession: "stdio:1:1"})
	m.Update(listingMsg{listing: listing(held)})
	<-sent // the first read, which noIncus fails
	info := task.Info{ID: "t-aaaaaaaaaa", State: task.StateFinished, Run: 1, Record: &task.Record{ID: "t-aaaaaaaaaa", Kind: task.KindCommand, Command: []string{"true"}}}
	m.Update(tasksMsg{instance: held.Name, fingerprint: fingerprint(&held), infos: []task.Info{info}})
	m.Update(tasksMsg{instance: held.Name, fingerprint: fingerprint(&held), err: errNoIncus})
	press(m, "f3")
	if view := m.render(); !strings.Contains(view, "t-aaaaaaaaaa") {
		t.Errorf("after a failed read the tasks read before are gone:\n%s", view)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clk.WaitForTimers(ctx, 1); err != nil {
		t.Fatal("no retry is waiting on the clock")
	}
	select {
	case msg := <-sent:
		t.Fatalf("retried before its time: %#v", msg)
	default:
	}
	clk.Advance(rewatchAfter)
	if msg := <-sent; msg != (taskChangedMsg{instance: held.Name}) {
		t.Fatalf("after %s the model was sent %#v", rewatchAfter, msg)
	}

	// Stopped meanwhile: the retry reads nothing.
	stopped := entry(held.Name, "Stopped", map[string]string{instance.KeyMCPOwner: "alice", instance.KeyMCPSession: "stdio:1:1"})
	m.Update(listingMsg{listing: listing(stopped)})
	m.Update(taskChangedMsg{instance: held.Name})
	m.rt.wg.Wait() // whatever the model started has ended
	select {
	case msg := <-sent:
		t.Errorf("a stopped instance's tasks were read: %#v", msg)
	default:
	}
}
