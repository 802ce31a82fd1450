package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/incustest"
)

// What a new user trips on: each test runs the real isx as a person at a
// terminal or a script would.

// `isx mcp < requests.jsonl` answers every request it read before its
// input ended, a slow tool call included, and then exits 0: the end of the
// input no longer cancels what is in flight.
func TestMCPAnswersEveryRequestBeforeItsInputEnds(t *testing.T) {
	c := incustest.Project(t)
	x := newCLI(t, c)
	requests := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"script","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":"three","method":"tools/call","params":{"name":"list_templates","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":4.0,"method":"ping"}`,
	}, "\n") + "\n"
	input := filepath.Join(t.TempDir(), "requests.jsonl")
	if err := os.WriteFile(input, []byte(requests), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(input)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := x.command(ctx, "mcp")
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = f, &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("isx mcp < requests.jsonl: %v\n%s", err, stderr.String())
	}
	answered := map[string]json.RawMessage{}
	for line := range strings.Lines(stdout.String()) {
		var answer struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &answer); err != nil {
			t.Fatalf("isx mcp wrote a line that is not JSON: %q", line)
		}
		if answer.Error != nil {
			t.Errorf("request %s was refused: %s", answer.ID, answer.Error)
		}
		answered[string(answer.ID)] = answer.Result
	}
	ids := slicesOfKeys(answered)
	if want := []string{`"three"`, "1", "2", "4"}; !slices.Equal(ids, want) {
		t.Fatalf("isx mcp answered %v, want %v; it printed %d bytes:\n%s\nstderr:\n%s", ids, want, stdout.Len(), stdout.String(), stderr.String())
	}
	var listed struct {
		IsError           bool            `json:"isError"`
		StructuredContent json.RawMessage `json:"structuredContent"`
	}
	if err := json.Unmarshal(answered[`"three"`], &listed); err != nil || listed.IsError || listed.StructuredContent == nil {
		t.Errorf("list_templates after the input ended: %s (%v)", answered[`"three"`], err)
	}
}

func slicesOfKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// On a terminal, isx mcp says on stderr what it is and how to register it
// with Claude Code, then serves as ever; Ctrl-D ends it.
func TestMCPOnATerminalSaysWhatItIs(t *testing.T) {
	c := incustest.Project(t)
	x := newCLI(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tm := startTerminal(t, x.command(ctx, "mcp"))
	tm.expect("isx mcp is an MCP server on stdin and stdout")
	tm.expect("claude mcp add --scope user isx -- ")
	tm.expect(" mcp\r\n")
	tm.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"person","version":"1"}}}`)
	tm.expect(`"id":1,"result"`)
	if _, err := tm.f.Write([]byte{4}); err != nil { // Ctrl-D at the start of a line
		t.Fatal(err)
	}
	tm.wait()
}

// A template whose parent no source defines is invalid in every command
// that shows it, each with the nearest name: isx list (table, hint and
// --json), isx doctor, isx build, and isx branch, which says it cannot be
// built rather than that it is not.
func TestAMissingParentIsInvalidEverywhere(t *testing.T) {
	c := incustest.Project(t)
	x := newCLI(t, c)
	file := x.userTemplate(t, "ux-bad.yaml", "name: ux-bad\nparent: tpl-dve\n")
	const why = `names parent template "tpl-dve", which no source defines; did you mean tpl-dev?`

	r := x.ok("list")
	_, templates := table(r.stdout, "TEMPLATE")
	if got := row(templates, "ux-bad"); !slices.Equal(got, []string{"ux-bad", "user", "invalid"}) {
		t.Errorf("isx list shows ux-bad as %v:\n%s", got, r)
	}
	if !strings.Contains(r.stderr, "hint: ux-bad: "+file+":2: parent: "+why) {
		t.Errorf("isx list does not say why ux-bad is invalid:\n%s", r)
	}
	var listed listJSON
	if err := json.Unmarshal([]byte(x.ok("list", "--json").stdout), &listed); err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(listed.Templates, func(t templateJSON) bool { return t.Name == "ux-bad" }); i < 0 || listed.Templates[i].Status != "invalid" {
		t.Errorf("isx list --json: %+v", listed.Templates)
	}

	r = x.ok("doctor")
	if line := doctorLine(r.stdout, statusOK, "templates"); !strings.Contains(line, "invalid: ux-bad") || strings.Contains(line, "not built: ux-bad") {
		t.Errorf("isx doctor's templates line: %q\n%s", line, r.stdout)
	}
	if line := doctorLine(r.stdout, statusWarn, "templates"); !strings.Contains(line, why) {
		t.Errorf("isx doctor does not warn why ux-bad is invalid:\n%s", r.stdout)
	}

	if r = x.run("build", "ux-bad"); r.code != exitFailure || !strings.Contains(r.stderr, why) {
		t.Errorf("isx build ux-bad: %s", r)
	}
	r = x.run("branch", "w1", "--from", "ux-bad")
	if r.code != exitFailure || !strings.Contains(r.stderr, "template ux-bad is not built, and cannot be until its definition is fixed") || !strings.Contains(r.stderr, why) {
		t.Errorf("isx branch from ux-bad: %s", r)
	}
}

// An instance cannot have a template's name, built or not; isx branch
// says it is the template's name instead of pointing at destroying it.
func TestBranchRefusesATemplatesName(t *testing.T) {
	c := incustest.Project(t)
	x := newCLI(t, c)
	buildtest.Build(t, c, buildtest.Templates(t), buildtest.BusyBox)
	for _, name := range []string{buildtest.BusyBox, buildtest.Debian} {
		r := x.run("branch", name, "--from", buildtest.BusyBox)
		if r.code != exitFailure || !strings.Contains(r.stderr, "isx: "+name+" is the name of a template, so an instance cannot have it") ||
			!strings.Contains(r.stderr, "hint: give the instance a name of its own, e.g. `isx branch work --from "+buildtest.BusyBox+"`") ||
			strings.Contains(r.stderr, "destroy") {
			t.Errorf("isx branch %s --from %s: %s", name, buildtest.BusyBox, r)
		}
	}
	if names := instanceNames(t, c); !slices.Equal(names, []string{buildtest.BusyBox}) {
		t.Errorf("the project holds %v after the refusals", names)
	}
}

// isx init --non-interactive says what it did: it keeps an unchanged
// config.yaml as it was (and says so), prints the command that registers
// isx mcp with Claude Code, and points at building the default template
// only while it is not built or is stale.
func TestInitNonInteractiveSaysWhatItDid(t *testing.T) {
	c := incustest.Project(t)
	x := newCLI(t, c)
	cfg, err := config.Load(x.home)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DefaultTemplate = buildtest.BusyBox
	if err := config.Save(x.home, cfg); err != nil {
		t.Fatal(err)
	}
	path := config.ConfigPath(x.home)
	written, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	register := "claude mcp add --scope user isx -- " + isxBinary + " mcp"

	r := x.ok("init", "--non-interactive")
	for _, want := range []string{
		"Kept " + path + " as it was: nothing in it changed.",
		"isx mcp (agents on this machine using isx) is not set up",
		register,
		"Next: `isx build " + buildtest.BusyBox + "`, then `isx branch work --from " + buildtest.BusyBox + "`",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("init lacks %q: %s", want, r)
		}
	}
	if strings.Contains(r.stdout, "Wrote") {
		t.Errorf("init says it wrote an unchanged config.yaml: %s", r)
	}
	if now, err := os.Stat(path); err != nil || !now.ModTime().Equal(written.ModTime()) {
		t.Errorf("init rewrote the unchanged config.yaml (%v)", err)
	}

	buildtest.Build(t, c, buildtest.Templates(t), buildtest.BusyBox)
	if err := config.SaveMCPTemplates(x.home, []string{buildtest.BusyBox}); err != nil {
		t.Fatal(err)
	}
	r = x.ok("init", "--non-interactive")
	for _, want := range []string{
		"isx mcp is set up (templates agents may use: " + buildtest.BusyBox + ")",
		register,
		buildtest.BusyBox + " is built. Next: `isx branch work --from " + buildtest.BusyBox + "` and `isx shell work`.",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("init after the build lacks %q: %s", want, r)
		}
	}
	if strings.Contains(r.stdout, "isx build") {
		t.Errorf("init points at building a built template: %s", r)
	}

	stamp(t, c, buildtest.BusyBox, map[string]string{"user.isx.definition-hash": "0"})
	if r = x.ok("init", "--non-interactive"); !strings.Contains(r.stdout, "Next: `isx build "+buildtest.BusyBox+"`, which is stale, then") {
		t.Errorf("init with the template stale: %s", r)
	}

	other := incustest.Project(t)
	if r = x.ok("init", "--non-interactive", "--project", other.ProjectName()); !strings.Contains(r.stdout, "Wrote "+path) {
		t.Errorf("init with a new project: %s", r)
	}
}

// On a terminal isx branch shows each part of making the instance as
// build shows its steps, counting its seconds, with the note that the
// host proxy was started on a line of its own; through a pipe it prints
// its one line as before.
func TestBranchShowsItsProgressOnATerminal(t *testing.T) {
	c := incustest.Project(t)
	x := newCLI(t, c)
	buildtest.Build(t, c, buildtest.Templates(t), buildtest.BusyBox)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	tm := startTerminal(t, x.command(ctx, "branch", "w1", "--from", buildtest.BusyBox))
	tm.expect("    [isx] copy " + buildtest.BusyBox + " to w1 and start it · 0s")
	tm.expect(clearLine + "    [isx] copy " + buildtest.BusyBox + " to w1 and start it (")
	tm.expect("    [isx] have the host proxy serve w1 · 0s")
	tm.expect(clearLine + "isx: started the host proxy (pid ")
	tm.expect("    [isx] have the host proxy serve w1 · ")
	tm.expect(clearLine + "    [isx] have the host proxy serve w1 (")
	tm.expect("Made w1 from " + buildtest.BusyBox)
	tm.wait()

	r := x.ok("branch", "w2", "--from", buildtest.BusyBox)
	if want := "Made w2 from " + buildtest.BusyBox + " (network: default) and started it; `isx shell w2` opens a shell in it.\n"; r.stdout != want {
		t.Errorf("isx branch through a pipe printed %q, want %q", r.stdout, want)
	}
}

// A mistyped command gets the nearest one, as actiond's do, at the top
// and under isx proxy (which printed its help and exited 0); a template
// key that is not isx's gets the one meant, for near spellings and for
// the words other tools use (steps for run).
func TestMistakesGetTheNameMeant(t *testing.T) {
	x := &cli{t: t, home: t.TempDir()}
	for args, want := range map[string]string{
		"lst":          "hint: did you mean list?",
		"destory w1":   "hint: did you mean destroy?",
		"proxy stauts": "status?",
		"frobnicate":   "hint: `isx --help` lists the commands",
	} {
		r := x.run(strings.Fields(args)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "unknown command") || !strings.Contains(r.stderr, want) {
			t.Errorf("isx %s: %s", args, r)
		}
	}

	c := incustest.Project(t)
	x = newCLI(t, c)
	for name, c := range map[string]struct{ definition, want string }{
		"tpl-steps": {"steps:\n  - run: true\n", `steps: unknown key "steps" (did you mean run?); the keys allowed here are`},
		"tpl-cmd":   {"run:\n  - command: true\n", `run[0].command: unknown key "command" (did you mean run?)`},
		"tpl-perms": {"files:\n  - path: /etc/x\n    content: x\n    perms: 0600\n", `files[0].perms: unknown key "perms" (did you mean mode?)`},
		"tpl-near":  {"packags: [git]\n", `unknown key "packags" (did you mean packages?)`},
		"tpl-far":   {"flavour: x\n", `unknown key "flavour"; the keys allowed here are`},
	} {
		x.userTemplate(t, name+".yaml", "name: "+name+"\nimage: isx/busybox\n"+c.definition)
		if r := x.run("build", name); r.code != exitFailure || !strings.Contains(r.stderr, c.want) {
			t.Errorf("isx build %s: want %q in %s", name, c.want, r)
		}
	}
}
