package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/incusspawn/isx/internal/isx/build"
	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/holding"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/task"
	"github.com/incusspawn/isx/internal/mcpkit/anyschema"
)

// liveWithin is how soon a change made by another process must show.
const liveWithin = time.Second

// buildTimeout bounds a build started from the TUI.
const buildTimeout = 5 * time.Minute

// agentSession is a real `isx mcp` with a go-sdk client on its stdio, as an
// agent on the host runs it.
type agentSession struct {
	t       *testing.T
	cs      *mcp.ClientSession
	id      string // the session id isx mcp stamps: stdio:<pid>:<start>
	schemas map[string]*anyschema.Validator
	stderr  bytes.Buffer
	closed  bool
}

func startAgent(t *testing.T, x *cli) *agentSession {
	t.Helper()
	a := &agentSession{t: t, schemas: map[string]*anyschema.Validator{}}
	cmd := x.command(context.Background(), "mcp")
	cmd.Stderr = &a.stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "isx-tui-test", Version: "1.0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 20 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connecting to isx mcp: %v\n%s", err, a.stderr.String())
	}
	a.cs = cs
	if a.id, err = holding.SessionOf(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if a.schemas[tool.Name], err = anyschema.Compile(tool.OutputSchema); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(a.close)
	return a
}

// call calls a tool, requires success and checks the result against the
// tool's output schema.
func (a *agentSession) call(tool string, args map[string]any) map[string]any {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := a.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil || res.IsError {
		a.t.Fatalf("%s: %v %+v\n%s", tool, err, res, a.stderr.String())
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		a.t.Fatal(err)
	}
	if err := a.schemas[tool].ValidateJSON(raw); err != nil {
		a.t.Fatalf("%s: result does not match its output schema: %v\n%s", tool, err, raw)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		a.t.Fatal(err)
	}
	return out
}

// close ends the session as an agent quitting does: isx mcp stamps its
// instances orphaned and exits.
func (a *agentSession) close() {
	if a.closed {
		return
	}
	a.closed = true
	if err := a.cs.Close(); err != nil {
		a.t.Logf("closing isx mcp: %v", err)
	}
}

// tuiFixture is a project with the busybox template built and approved for
// isx mcp, and an isx home for it.
func tuiFixture(t *testing.T) (*incus.Client, *cli) {
	t.Helper()
	c := incustest.Project(t)
	x := newCLI(t, c)
	buildtest.Build(t, c, buildtest.Templates(t), buildtest.BusyBox)
	if err := config.SaveMCPTemplates(x.home, []string{buildtest.BusyBox}); err != nil {
		t.Fatal(err)
	}
	return c, x
}

// listRows reads a list off the screen: the rows under the header that
// starts with first, split into cells, the cursor's marker dropped.
func listRows(text, first string) (header []string, rows [][]string) {
	in := false
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimPrefix(line, "> ")
		trimmed := strings.TrimSpace(line)
		switch {
		case !in && strings.HasPrefix(trimmed, first+" "):
			in = true
			header = columnGap.Split(trimmed, -1)
		case in && trimmed == "":
			return header, rows
		case in:
			rows = append(rows, columnGap.Split(trimmed, -1))
		}
	}
	return header, rows
}

// The lists show what `isx list` shows, without an MCP column even while
// MCP instances exist (ISX-049); F3 on an instance an agent holds through
// isx mcp shows its MCP state, purpose and holder (ISX-048), and its tasks;
// mission control shows the agent's instance and task with the command
// that joins it, ready to copy. When the agent's session ends, the details
// show the instance orphaned within a second. Each view's screen at 80x24
// and 160x48 is a golden file.
func TestTUIShowsWhatListShowsISX048ISX049(t *testing.T) {
	c, x := tuiFixture(t)
	x.ok("branch", "w1", "--from", buildtest.BusyBox)
	x.ok("branch", "w2", "--from", buildtest.BusyBox, "--airgap")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := c.StopInstance(ctx, "w2", incus.StopOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	agent := startAgent(t, x)
	created := agent.call("create_instance", map[string]any{"template": buildtest.BusyBox, "name_hint": "870", "purpose": "#870 implement"})
	held, _ := created["instance"].(string)
	started := agent.call("exec", map[string]any{"instance": held, "command": "sleep 600", "background": true})
	taskID, _ := started["task_id"].(string)

	s := startScreen(t, x, 80, 24, nil, "tui")
	text := s.expect(held, "w2", "tpl-test-busybox-child")

	// ISX-049: isx list has its MCP column now; the TUI's list does not.
	listed := x.ok("list").stdout
	if listHeader, _ := table(listed, "NAME"); !slices.Contains(listHeader, "MCP") {
		t.Fatalf("isx list shows no MCP column, so no MCP instance exists:\n%s", listed)
	}
	header, rows := listRows(text, "NAME")
	if want := []string{"NAME", "TEMPLATE", "STATE", "NETWORK", "AGE"}; !slices.Equal(header, want) {
		t.Errorf("the instance list's header is %v, want %v", header, want)
	}
	_, listedRows := table(listed, "NAME")
	if len(rows) != len(listedRows) {
		t.Errorf("the TUI lists %d instances, isx list %d:\n%s\n%s", len(rows), len(listedRows), text, listed)
	}
	for _, want := range listedRows {
		if got := row(rows, want[0]); len(got) < 3 || !slices.Equal(got[:3], want[:3]) {
			t.Errorf("instance %s: the TUI shows %v, isx list %v", want[0], got, want)
		}
	}
	_, templates := listRows(text, "TEMPLATE")
	_, listedTemplates := table(listed, "TEMPLATE")
	if len(templates) != len(listedTemplates) {
		t.Errorf("the TUI lists %d templates, isx list %d", len(templates), len(listedTemplates))
	}
	for _, want := range listedTemplates {
		if got := row(templates, want[0]); len(got) < 3 || !slices.Equal(got[:3], want) {
			t.Errorf("template %s: the TUI shows %v, isx list %v", want[0], got, want)
		}
	}
	if got := row(templates, buildtest.DebianChild); len(got) != 4 || got[3] != "claude,codex" {
		t.Errorf("the agents' template's tools: %v", got)
	}
	if got := row(rows, "w2"); len(got) != 5 || got[3] != "airgap" {
		t.Errorf("w2's network: %v", got)
	}
	golden := goldenScreens{t: t, x: x, c: c}
	golden.check(s, "lists-80x24")

	// ISX-048: F3 on the instance the agent holds.
	if selected := selectedRow(text); !strings.HasPrefix(selected, held+" ") {
		t.Fatalf("the cursor is not on %s but on %q", held, selected)
	}
	s.keys("F3")
	text = s.expect("Purpose    #870 implement", taskID)
	for _, want := range []string{
		"MCP        held: #870 implement",
		"Holder     " + agent.id + " (alive)",
		"Template   tpl-test-busybox (search-path)",
		"sleep 600",
		"Activity   0 tokens (in 0, out 0, cache read 0, cache write 0) since",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the details lack %q:\n%s", want, text)
		}
	}
	if _, taskRows := listRows(text, "TASK"); len(taskRows) != 1 || taskRows[0][0] != taskID || taskRows[0][1] != "command" || taskRows[0][2] != "running" {
		t.Errorf("the details' tasks: %v\n%s", taskRows, text)
	}
	golden.check(s, "details-80x24")

	s.keys("F4")
	text = s.expect("mission control", "join: isx shell --task "+taskID+" "+held)
	_, missionRows := listRows(text, "INSTANCE")
	// At 80 columns the activity columns leave the long cells cut short
	// (the selected row's name is spelt out below the table).
	if len(missionRows) != 1 || !slices.EqualFunc(missionRows[0][:5], []string{held, "held", taskID, "running", "command"}, cutShort) {
		t.Errorf("mission control's rows: %v\n%s", missionRows, text)
	}
	// create_instance started the host proxy: its counts of the instance
	// are in mission control's own columns, streamed from the proxy.
	if header, _ := listRows(text, "INSTANCE"); !slices.Contains(header, "TOKENS") || !slices.Contains(header, "IN FLIGHT") {
		t.Errorf("mission control has no activity columns although the proxy runs:\n%s", text)
	} else if got := missionRows[0]; len(got) < 8 || got[6] != "0" || got[7] != "0" {
		t.Errorf("mission control's counts of %s: %v, want 0 tokens and 0 in flight", held, got)
	}
	golden.check(s, "mission-80x24")
	s.keys("c")
	s.expect("Copied: isx shell --task " + taskID)
	if buffer := s.tmux("show-buffer"); buffer != task.JoinCommand(taskID, held) {
		t.Errorf("the clipboard holds %q", buffer)
	}

	s.keys("F1")
	s.expect("The instance list has no MCP column")
	golden.check(s, "help-80x24")

	// The same views on a larger terminal.
	s.resize(160, 48)
	golden.check(s, "help-160x48")
	s.keys("Escape")
	s.expect("join: isx shell")
	golden.check(s, "mission-160x48")
	s.keys("Escape")
	s.gone("· mission control") // the title bar; the footer names F4
	golden.check(s, "lists-160x48")
	s.keys("F3")
	s.expect("Purpose    #870 implement")
	golden.check(s, "details-160x48")

	// The agent's session ends: the details say orphaned within a second.
	agent.close()
	ended := time.Now()
	s.waitFor("the instance orphaned", liveWithin, func(text string) bool {
		return strings.Contains(text, "MCP        orphaned") && strings.Contains(text, "Orphaned")
	})
	t.Logf("the orphaned stamp showed %s after isx mcp ended", time.Since(ended))
	s.keys("q")
	if status := s.exited(); status != "0" {
		t.Errorf("isx tui exited with %s", status)
	}
}

// goldenScreens compares screens with the files in testdata/screens, once
// what varies between runs is replaced: the project's name, ages, times,
// random suffixes and ids, session ids and the host user.
// UPDATE_SCREENS=1 rewrites them.
type goldenScreens struct {
	t *testing.T
	x *cli
	c *incus.Client
}

var screenVarying = []struct {
	pattern *regexp.Regexp
	with    string
}{
	// A time may be wrapped between its date and its clock.
	{regexp.MustCompile(`\d{4}-\d{2}-\d{2}(?:[ T]|\n\s*)\d{2}:\d{2}:\d{2}( UTC|Z)`), "<time>"},
	{regexp.MustCompile(`stdio:\d+:\d+`), "stdio:<pid>:<start>"},
	{regexp.MustCompile(`\bt-[a-z2-7]{10}\b`), "t-<task-id>"},
	{regexp.MustCompile(`(mcp-test-busybox-870-)[a-z2-7]{5}\b`), "${1}<sfx>"},
	{regexp.MustCompile(`\b\d+[smhd]\b`), "<age>"},
	{regexp.MustCompile(`\b[0-9a-f]{64}\b`), "<hash>"},
}

func (g goldenScreens) normalise(text string) string {
	text = strings.ReplaceAll(text, g.c.ProjectName(), "<project>")
	text = strings.ReplaceAll(text, build.Version, "<version>")
	if owner, err := instance.CurrentOwner(); err == nil {
		text = regexp.MustCompile(`\b`+regexp.QuoteMeta(owner)+`\b`).ReplaceAllString(text, "<user>")
	}
	for _, v := range screenVarying {
		text = v.pattern.ReplaceAllString(text, v.with)
	}
	var lines []string
	for _, line := range strings.Split(text, "\n") {
		lines = append(lines, strings.TrimRight(line, " "))
	}
	return strings.TrimRight(strings.Join(lines, "\n"), "\n") + "\n"
}

// check waits until the screen is settled (nothing still being read, no
// message from an action) and compares it with its golden file.
func (g goldenScreens) check(s *screen, name string) {
	g.t.Helper()
	path := filepath.Join("testdata", "screens", name+".txt")
	text := g.normalise(s.waitFor("a settled screen", screenTimeout, func(text string) bool {
		return !strings.Contains(text, "reading") && !strings.Contains(text, "Reading")
	}))
	if os.Getenv("UPDATE_SCREENS") != "" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			g.t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			g.t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		g.t.Fatalf("%v (UPDATE_SCREENS=1 writes it)", err)
	}
	if string(want) != text {
		g.t.Errorf("screen %s differs from %s (UPDATE_SCREENS=1 rewrites it):\n--- want\n%s--- got\n%s", name, path, want, text)
	}
}

// toTemplates and toInstances give the keys to a list (tab) and wait
// until its keys are in the footer.
func (s *screen) toTemplates() {
	s.t.Helper()
	s.keys("Tab")
	s.expect("b branch")
}

func (s *screen) toInstances() {
	s.t.Helper()
	s.keys("Tab")
	s.expect("enter shell")
}

// selectRow moves the cursor down until it is on the row of name.
func (s *screen) selectRow(name string) {
	s.t.Helper()
	for range 30 {
		text := s.text()
		selected := selectedRow(text)
		if strings.HasPrefix(selected, name+" ") || selected == name {
			return
		}
		s.keys("Down")
		s.waitFor("the cursor to move", screenTimeout, func(now string) bool { return selectedRow(now) != selected })
	}
	s.t.Fatalf("the cursor never reached %s:\n%s", name, s.text())
}

// What a new user meets first: with no instance the keys are the
// templates', so b branches as the empty list says; a template's details
// offer branch and build, not shell, start or stop; an old error line does
// not come back once a filter is kept; and F4 says what it opens, which
// explains itself.
func TestTUIForANewUser(t *testing.T) {
	_, x := tuiFixture(t)
	s := startScreen(t, x, 80, 24, nil, "tui")
	s.expect("select a template and press b", buildtest.BusyBoxChild, "F4 mission control")
	s.selectRow(buildtest.BusyBox)
	s.keys("b")
	s.expect("Branch " + buildtest.BusyBox + " as:")
	s.keys("Escape")
	s.gone("Branch " + buildtest.BusyBox + " as:")

	// The lists' footer says "F3 details" too: wait for the details view's
	// own title and keys, or the escape below reaches isx so soon after F3
	// that it reads the escape with the next key as one alt key.
	s.keys("F3")
	text := s.expect("· details", "esc back", "b branch", "r build")
	for _, unwanted := range []string{"enter shell", "s start", "x stop", "d destroy"} {
		if strings.Contains(text, unwanted) {
			t.Errorf("a template's details offer %q:\n%s", unwanted, text)
		}
	}
	s.keys("Escape")
	// Wait for the lists before the next key, which a terminal would
	// otherwise read with the escape as one alt key.
	s.gone("esc back")
	s.expect("select a template and press b")

	s.selectRow(buildtest.BusyBoxChild)
	s.keys("b")
	notBuilt := buildtest.BusyBoxChild + " is not built; press r to build it first."
	s.expect(notBuilt)
	s.keys("/")
	s.typed("child")
	s.keys("Enter")
	s.expect("filter “child”")
	if text := s.text(); strings.Contains(text, notBuilt) {
		t.Errorf("the old error line came back after the filter:\n%s", text)
	}
	s.keys("Escape")
	s.gone("filter “child”")

	s.keys("F4")
	s.expect("· mission control", "Every instance and task agents made through")
}

// `isx` alone on a terminal opens the TUI, and its keys do what they say:
// branch from the selected template (with a network mode), stop, start,
// shell (it leaves the TUI and comes back), destroy after a confirmation,
// and build with its progress shown. A change made by another process
// shows within a second, also when it deletes the instance under the
// cursor or in the details.
func TestTUIKeys(t *testing.T) {
	c, x := tuiFixture(t)
	x.ok("branch", "w1", "--from", buildtest.BusyBox)
	s := startScreen(t, x, 80, 24, nil)
	s.expect("w1", "tpl-test-busybox-child")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	inspect := func(name string) (*incus.Instance, instance.Stamps) {
		t.Helper()
		inst, _, err := c.GetInstance(ctx, name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return inst, instance.ParseStamps(inst.Config)
	}

	// Branch: b on a template asks for the name; tab picks the network.
	s.toTemplates()
	s.selectRow(buildtest.BusyBox)
	s.keys("b")
	s.expect("Branch tpl-test-busybox as:")
	s.typed("w7")
	s.keys("Tab")
	s.expect("[proxy-only]")
	s.keys("Enter")
	s.expect("Made w7 from tpl-test-busybox (network: proxy-only)")
	inst, stamps := inspect("w7")
	if !inst.Running() || stamps.Template != buildtest.BusyBox || stamps.Network != instance.NetworkProxyOnly || stamps.Type != instance.TypeInstance {
		t.Errorf("w7 as branched: %s %+v", inst.Status, stamps)
	}
	text := s.waitFor("the cursor on w7, running", screenTimeout, func(text string) bool {
		return strings.HasPrefix(selectedRow(text), "w7 ") && rowState(text, "w7") == "running"
	})
	if got := row(mustRows(t, text, "NAME"), "w7"); len(got) != 5 || got[3] != "proxy-only" {
		t.Errorf("w7's row: %v", got)
	}

	// Stop and start.
	s.keys("x")
	s.waitFor("w7 stopped", screenTimeout, func(text string) bool { return rowState(text, "w7") == "stopped" })
	if inst, _ := inspect("w7"); inst.Running() {
		t.Errorf("w7 shows stopped but is %s", inst.Status)
	}
	s.keys("s")
	s.waitFor("w7 running", screenTimeout, func(text string) bool { return rowState(text, "w7") == "running" })
	if inst, _ := inspect("w7"); !inst.Running() {
		t.Errorf("w7 shows running but is %s", inst.Status)
	}

	// Shell: the TUI hands the terminal over and takes it back.
	s.keys("Enter")
	s.expect("~ $")
	s.typed("echo tui-$((6*7)) $(id -u)")
	s.keys("Enter")
	s.expect("tui-42 1000")
	if !instance.Attended(x.home, x.project, "w7") {
		t.Error("w7 is not attended while the shell runs")
	}
	s.typed("exit")
	s.keys("Enter")
	s.expect("Left the shell in w7.", "NAME")
	if instance.Attended(x.home, x.project, "w7") {
		t.Error("w7 is still attended after the shell")
	}

	// Destroy asks first; anything but y keeps the instance.
	s.keys("d")
	s.expect("Destroy w7?")
	s.keys("n")
	s.expect("Kept w7.")
	inspect("w7")
	s.keys("d")
	s.expect("Destroy w7?")
	s.keys("y")
	s.expect("Destroyed w7.")
	if _, _, err := c.GetInstance(ctx, "w7"); err == nil {
		t.Error("w7 still exists")
	}
	s.waitFor("w7 gone from the list", screenTimeout, func(text string) bool { return rowState(text, "w7") == "" })

	// Build, with its progress.
	s.toTemplates()
	s.selectRow(buildtest.BusyBoxChild)
	s.keys("r")
	s.expect("Building " + buildtest.BusyBoxChild + ":")
	built := "Built 1 template(s) in project " + x.project + "."
	// A build on a daemon other tests share can take a while.
	s.waitFor(built, buildTimeout, func(text string) bool { return strings.Contains(text, built) })
	s.waitFor("the child template built", screenTimeout, func(text string) bool {
		_, rows := listRows(text, "TEMPLATE")
		got := row(rows, buildtest.BusyBoxChild)
		return len(got) >= 3 && got[2] == "built"
	})
	if _, stamps := inspect(buildtest.BusyBoxChild); !stamps.IsTemplate() {
		t.Errorf("the child template is not built: %+v", stamps)
	}

	// Another process branches: the new instance shows within a second.
	x.ok("branch", "w9", "--from", buildtest.BusyBox)
	made := time.Now()
	s.waitFor("w9 made by isx branch", liveWithin, func(text string) bool { return rowState(text, "w9") == "running" })
	t.Logf("w9 showed %s after isx branch returned", time.Since(made))

	// Typing after / filters the lists; esc drops the filter.
	s.keys("/")
	s.typed("w9")
	s.keys("Enter")
	text = s.waitFor("only w9 listed", screenTimeout, func(text string) bool {
		return rowState(text, "w9") == "running" && rowState(text, "w1") == ""
	})
	if !strings.Contains(text, "No template matches the filter.") {
		t.Errorf("the filter does not cover the templates:\n%s", text)
	}
	s.keys("Escape")
	s.waitFor("w1 listed again", screenTimeout, func(text string) bool { return rowState(text, "w1") == "running" })

	// ... and deletes the instance under the cursor: the cursor moves to
	// a neighbour.
	s.toInstances()
	s.selectRow("w9")
	x.ok("destroy", "--force", "w9")
	destroyed := time.Now()
	text = s.waitFor("w9 gone", liveWithin, func(text string) bool { return rowState(text, "w9") == "" })
	t.Logf("w9 went %s after isx destroy returned", time.Since(destroyed))
	if selected := selectedRow(text); !strings.HasPrefix(selected, "w1 ") {
		t.Errorf("after w9 went the cursor is on %q, want w1", selected)
	}

	// ... or the instance whose details are open.
	s.keys("F3")
	s.expect("Created")
	x.ok("destroy", "--force", "w1")
	s.expect("w1 no longer exists: it was deleted.")
	s.keys("Escape")
	s.expect("No instances; select a template and press b to branch one.")
	s.keys("q")
	if status := s.exited(); status != "0" {
		t.Errorf("isx exited with %s", status)
	}
}

func mustRows(t *testing.T, text, first string) [][]string {
	t.Helper()
	_, rows := listRows(text, first)
	if rows == nil {
		t.Fatalf("no %s list on the screen:\n%s", first, text)
	}
	return rows
}

// rowState is the STATE cell of an instance's row, "" when it is not listed.
func rowState(text, name string) string {
	_, rows := listRows(text, "NAME")
	if r := row(rows, name); len(r) >= 3 {
		return r[2]
	}
	return ""
}

// When Incus goes away the TUI says so, with how to start it, and keeps
// trying; when it is back the banner goes and the lists catch up with what
// changed meanwhile, and changes show live again. Incus "goes away" for
// this isx only: it talks to a relay of the socket that the test closes.
func TestTUIIncusGoesAway(t *testing.T) {
	c, x := tuiFixture(t)
	x.ok("branch", "w1", "--from", buildtest.BusyBox)
	r := startRelay(t, c.Socket())
	x.env = append(x.env, envSocket+"="+r.path)
	s := startScreen(t, x, 80, 24, nil)
	s.expect("w1")

	r.close()
	text := s.expect("Incus is not answering", "Retrying")
	for _, want := range []string{"systemctl start", "incus", r.path} {
		if !strings.Contains(strings.Join(strings.Fields(text), " "), want) {
			t.Errorf("the banner does not say %q:\n%s", want, text)
		}
	}
	// Meanwhile, another isx (on the real socket) makes an instance.
	other := &cli{t: t, home: x.home, project: x.project}
	other.ok("branch", "w2", "--from", buildtest.BusyBox)

	r.open()
	s.gone("Incus is not answering")
	s.waitFor("w2, made while Incus was away", screenTimeout, func(text string) bool { return rowState(text, "w2") == "running" })
	other.ok("branch", "w3", "--from", buildtest.BusyBox)
	made := time.Now()
	s.waitFor("w3, made after Incus came back", liveWithin, func(text string) bool { return rowState(text, "w3") == "running" })
	t.Logf("w3 showed %s after isx branch returned", time.Since(made))
}

var colourSequence = regexp.MustCompile(`\x1b\[[0-9;]*\b(3[0-7]|9[0-7]|4[0-7]|10[0-7]|38|48)[;m]`)

// NO_COLOR turns every colour off; the cursor's row is still marked.
// Without it the screen has colours.
func TestTUINoColor(t *testing.T) {
	_, x := tuiFixture(t)
	x.ok("branch", "w1", "--from", buildtest.BusyBox)
	plain := startScreen(t, x, 80, 24, []string{"NO_COLOR=1"})
	coloured := startScreen(t, x, 80, 24, nil)
	for _, s := range []*screen{plain, coloured} {
		s.expect("w1", "tpl-test-busybox-child")
	}
	if seq := colourSequence.FindString(plain.escapes()); seq != "" {
		t.Errorf("with NO_COLOR the screen has colour %q:\n%q", seq, plain.escapes())
	}
	if !strings.HasPrefix(selectedRow(plain.text()), "w1 ") {
		t.Errorf("with NO_COLOR the cursor's row is not marked:\n%s", plain.text())
	}
	if !colourSequence.MatchString(coloured.escapes()) {
		t.Errorf("without NO_COLOR the screen has no colour:\n%q", coloured.escapes())
	}
}

// Without a terminal `isx` prints its help as before, and `isx tui` says
// it needs one.
func TestNoTerminalNoTUI(t *testing.T) {
	x := &cli{t: t, home: t.TempDir()}
	r := x.ok()
	for _, want := range []string{"Usage:", "Available Commands:", "tui", "list"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("isx without a terminal lacks %q: %s", want, r)
		}
	}
	r = x.run("tui")
	if r.code != exitFailure || !strings.Contains(r.stderr, "needs a terminal") {
		t.Errorf("isx tui without a terminal: %s", r)
	}
	if r := x.run("nonsense"); r.code != exitUsage {
		t.Errorf("isx nonsense: %s", r)
	}
}

// cutShort says whether a table cell shows want, whole or cut short with
// an ellipsis.
func cutShort(got, want string) bool {
	if got == want {
		return true
	}
	prefix, cut := strings.CutSuffix(got, "…")
	return cut && strings.HasPrefix(want, prefix)
}
