package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/incusspawn/isx/internal/testkit"
)

// claudeVersion is the Claude Code the tests register isx mcp with.
const claudeVersion = "2.1.328"

// claudeDir is a directory holding the real Claude Code's `claude`: from
// PATH, or installed once from npm (@anthropic-ai/claude-code) into the
// temporary directory, as incustest builds its images.
func claudeDir(t *testing.T) string {
	t.Helper()
	if path, err := exec.LookPath("claude"); err == nil {
		return filepath.Dir(path)
	}
	prefix := filepath.Join(os.TempDir(), "isx-claude-code-"+claudeVersion)
	bin := filepath.Join(prefix, "node_modules", ".bin")
	if _, err := os.Stat(filepath.Join(bin, "claude")); err == nil {
		return bin
	}
	lock, err := os.OpenFile(prefix+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(bin, "claude")); err == nil {
		return bin
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "npm", "install", "--prefix", prefix, "--no-audit", "--no-fund", "@anthropic-ai/claude-code@"+claudeVersion).CombinedOutput()
	if err != nil {
		t.Fatalf("installing Claude Code from npm: %v\n%s", err, out)
	}
	return bin
}

// terminal drives a program on a pty, answering its prompts.
type terminal struct {
	t    *testing.T
	cmd  *exec.Cmd
	f    *os.File
	out  testkit.SyncBuffer
	seen int
	done chan struct{}
}

func startTerminal(t *testing.T, cmd *exec.Cmd) *terminal {
	t.Helper()
	f, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	tm := &terminal{t: t, cmd: cmd, f: f, done: make(chan struct{})}
	go func() {
		defer close(tm.done)
		io.Copy(&tm.out, f) //nolint:errcheck // ends with EIO when the program exits
	}()
	t.Cleanup(func() { f.Close() })
	return tm
}

// expect waits for want in what the program printed since the last expect.
// The bound is wide because what the program waits on is often incusd,
// which on two busy cores has once taken over 45 s to answer a GET; a
// program that is truly stuck is shown by stuck.
func (tm *terminal) expect(want string) string {
	tm.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var chunk string
	shown := func() bool {
		all := tm.out.String()
		i := strings.Index(all[tm.seen:], want)
		if i < 0 {
			return false
		}
		chunk = all[tm.seen : tm.seen+i+len(want)]
		tm.seen += i + len(want)
		return true
	}
	if err := incustest.Poll(ctx, 20*time.Millisecond, shown); err != nil {
		tm.t.Fatalf("the terminal never showed %q; it shows:\n%s\n%s", want, tm.out.String(), tm.stuck())
	}
	return chunk
}

// stuck says where a program that went quiet is waiting: the processes
// it started, and its goroutines, which a Go program prints on SIGQUIT
// (to the terminal, so they are read from there).
func (tm *terminal) stuck() string {
	if tm.cmd.Process == nil {
		return "(the program never started)"
	}
	tree, _ := exec.Command("ps", "-o", "pid,etime,stat,wchan:20,args", "--forest", "-s", strconv.Itoa(tm.cmd.Process.Pid)).CombinedOutput()
	before := len(tm.out.String())
	if err := tm.cmd.Process.Signal(syscall.SIGQUIT); err != nil {
		return fmt.Sprintf("processes:\n%s\n(could not signal it: %v)", tree, err)
	}
	select {
	case <-tm.done:
	case <-time.After(5 * time.Second):
	}
	return fmt.Sprintf("processes:\n%s\ngoroutines:\n%s", tree, tm.out.String()[before:])
}

func (tm *terminal) send(line string) {
	tm.t.Helper()
	if _, err := io.WriteString(tm.f, line+"\n"); err != nil {
		tm.t.Fatal(err)
	}
}

// wait waits for the program and returns all it printed.
func (tm *terminal) wait() string {
	tm.t.Helper()
	err := tm.cmd.Wait()
	<-tm.done
	if err != nil {
		tm.t.Fatalf("%v: %v\n%s", tm.cmd.Args, err, tm.out.String())
	}
	return tm.out.String()
}

// initTerminal starts `isx init` and answers the config.yaml questions.
func (x *cli) initTerminal(t *testing.T, ctx context.Context) *terminal {
	t.Helper()
	tm := startTerminal(t, x.command(ctx, "init"))
	tm.expect("Incus socket [")
	tm.send("")
	tm.expect("Incus project [")
	tm.send("")
	return tm
}

func mcpTemplates(t *testing.T, home string) []string {
	t.Helper()
	policy, err := config.LoadMCP(home)
	if err != nil {
		t.Fatal(err)
	}
	if policy.State == config.FileMissing {
		t.Fatal("no mcp.yaml")
	}
	return policy.Templates
}

func claudeJSON(t *testing.T, home string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(home, ".claude.json"))
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// isx init sets isx mcp up with the real Claude Code: off by default;
// accepted, it registers isx mcp for all projects and asks about each
// template that installs Claude Code or Codex; a re-run asks one question.
//
// ISX-284, ISX-285, ISX-286, ISX-287, ISX-288, ISX-289, ISX-290, ISX-291, ISX-294.
func TestInitMCPSetUpISX285(t *testing.T) {
	c := incustest.Project(t)
	x := newCLI(t, c)
	claude := claudeDir(t)
	x.env = append(x.env, "PATH="+claude+":"+os.Getenv("PATH"), "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// ISX-284: Enter leaves it off.
	tm := x.initTerminal(t, ctx)
	tm.expect("Set up isx mcp? [y/N]: ")
	tm.send("")
	tm.expect("Left isx mcp off")
	tm.wait()
	if _, err := os.Stat(config.MCPPath(x.home)); err == nil {
		t.Fatal("Enter wrote mcp.yaml")
	}
	if strings.Contains(claudeJSON(t, x.home), `"isx"`) {
		t.Fatal("Enter registered isx mcp")
	}

	// ISX-285, ISX-286, ISX-287: accepted.
	tm = x.initTerminal(t, ctx)
	tm.expect("Set up isx mcp? [y/N]: ")
	tm.send("y")
	tm.expect("Registered isx mcp with Claude Code for all projects.")
	answers := map[string]string{"tpl-dev": "n", buildtest.DebianChild: "y"}
	var asked []string
	for range answers {
		chunk := tm.expect("]: ")
		i := strings.LastIndex(chunk, "May agents use ")
		if i < 0 {
			t.Fatalf("not a template question: %q", chunk)
		}
		name := strings.Fields(chunk[i+len("May agents use "):])[0]
		asked = append(asked, name)
		tm.send(answers[name])
	}
	tm.expect("Templates agents may use: " + buildtest.DebianChild)
	tm.wait()
	if want := []string{"tpl-dev", buildtest.DebianChild}; !slices.Equal(asked, want) {
		t.Errorf("asked about %v, want %v (the templates with claude or codex)", asked, want)
	}
	if got := mcpTemplates(t, x.home); !slices.Equal(got, []string{buildtest.DebianChild}) {
		t.Errorf("mcp.yaml templates = %v", got)
	}
	// ISX-285, ISX-294: Claude Code has it, and reaches it.
	list := exec.CommandContext(ctx, filepath.Join(claude, "claude"), "mcp", "list")
	list.Env = append(x.baseEnv(), x.env...)
	list.Dir = t.TempDir()
	out, err := list.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "isx: "+isxBinary+" mcp") || !strings.Contains(string(out), "Connected") {
		t.Fatalf("claude mcp list: %v\n%s", err, out)
	}

	// ISX-288, ISX-291: a re-run asks one question; Enter keeps everything.
	before, registered := mcpFile(t, x.home), claudeJSON(t, x.home)
	tm = x.initTerminal(t, ctx)
	tm.expect("[t/n/Enter]: ")
	tm.send("")
	tm.expect("Kept isx mcp as it is.")
	printed := tm.wait()
	if strings.Count(printed, "[t/n/Enter]") != 1 || strings.Contains(printed, "May agents use") || strings.Contains(printed, "Set up isx mcp?") {
		t.Errorf("a re-run asked more than one question:\n%s", printed)
	}
	if mcpFile(t, x.home) != before || !sameRegistration(claudeJSON(t, x.home), registered) {
		t.Error("Enter changed mcp.yaml or the registration")
	}

	// ISX-290: n shows how to turn it off, and changes nothing.
	tm = x.initTerminal(t, ctx)
	tm.expect("[t/n/Enter]: ")
	tm.send("n")
	tm.expect("claude mcp remove --scope user isx")
	tm.wait()
	if mcpFile(t, x.home) != before {
		t.Error("n changed mcp.yaml")
	}

	// ISX-289: t asks again, offering the current approvals.
	tm = x.initTerminal(t, ctx)
	tm.expect("[t/n/Enter]: ")
	tm.send("t")
	for range answers {
		chunk := tm.expect("]: ")
		name := strings.Fields(chunk[strings.LastIndex(chunk, "May agents use ")+len("May agents use "):])[0]
		switch name {
		case buildtest.DebianChild:
			if !strings.HasSuffix(chunk, "[Y/n]: ") {
				t.Errorf("an approved template is not offered as yes: %q", chunk)
			}
			tm.send("")
		default:
			tm.send("y")
		}
	}
	tm.wait()
	if got := mcpTemplates(t, x.home); !slices.Equal(got, []string{buildtest.DebianChild, "tpl-dev"}) {
		t.Errorf("after t: %v", got)
	}
}

func mcpFile(t *testing.T, home string) string {
	t.Helper()
	data, err := os.ReadFile(config.MCPPath(home))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// sameRegistration compares the mcpServers part of ~/.claude.json (Claude
// Code updates its own bookkeeping there on every run).
func sameRegistration(a, b string) bool {
	cut := func(s string) string {
		i := strings.Index(s, `"mcpServers"`)
		if i < 0 {
			return ""
		}
		return s[i:]
	}
	return cut(a) == cut(b)
}

// Without Claude Code on PATH, accepting prints the exact command to
// register isx mcp by hand (ISX-294).
func TestInitMCPWithoutClaude(t *testing.T) {
	c := incustest.Project(t)
	x := newCLI(t, c)
	x.env = append(x.env, "PATH=/usr/sbin:/usr/bin:/sbin:/bin")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tm := x.initTerminal(t, ctx)
	tm.expect("Set up isx mcp? [y/N]: ")
	tm.send("y")
	tm.expect("claude mcp add --scope user isx -- " + isxBinary + " mcp")
	// The templates with Claude Code or Codex: tpl-dev and the agents' one.
	for range 2 {
		tm.expect("]: ")
		tm.send("")
	}
	tm.wait()
	if got := mcpTemplates(t, x.home); len(got) != 0 {
		t.Errorf("templates = %v", got)
	}
}

// The retired mcp: section: without mcp.yaml, isx init leaves the step
// alone; with mcp.yaml it only reminds the user to delete it.
//
// ISX-292, ISX-293.
func TestInitMCPOldSectionISX292(t *testing.T) {
	c := incustest.Project(t)
	x := newCLI(t, c)
	claude := claudeDir(t)
	x.env = append(x.env, "PATH="+claude+":"+os.Getenv("PATH"), "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
	configYAML := "project: " + c.ProjectName() + "\ntemplate-paths: [" + buildtest.Dir(t) + "]\nmcp:\n  templates: [tpl-dev]\n  max-instances: 2\n"
	if err := os.WriteFile(config.ConfigPath(x.home), []byte(configYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tm := x.initTerminal(t, ctx)
	tm.expect("has an `mcp:` section, which isx no longer reads")
	printed := tm.wait()
	if strings.Contains(printed, "Set up isx mcp?") {
		t.Errorf("isx init offered the set-up beside the old section:\n%s", printed)
	}
	if _, err := os.Stat(config.MCPPath(x.home)); err == nil {
		t.Error("isx init wrote mcp.yaml")
	}
	if strings.Contains(claudeJSON(t, x.home), `"isx"`) {
		t.Error("isx init registered isx mcp")
	}

	// With mcp.yaml: a reminder, and neither file changes.
	if err := os.WriteFile(config.MCPPath(x.home), []byte("templates: [tpl-dev]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	configBefore, err := os.ReadFile(config.ConfigPath(x.home))
	if err != nil {
		t.Fatal(err)
	}
	tm = x.initTerminal(t, ctx)
	tm.expect("Reminder: ")
	tm.expect("delete the section")
	tm.expect("[t/n/Enter]: ")
	tm.send("")
	tm.wait()
	configAfter, err := os.ReadFile(config.ConfigPath(x.home))
	if err != nil {
		t.Fatal(err)
	}
	if string(configAfter) != string(configBefore) || mcpFile(t, x.home) != "templates: [tpl-dev]\n" {
		t.Errorf("files changed:\n%s\n%s", configAfter, mcpFile(t, x.home))
	}
}
