package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/template"
)

// The isx mcp step of isx init (seed 001): off by default; when accepted it
// registers isx mcp with Claude Code for all projects and asks, for each
// trusted template that installs Claude Code or Codex, whether agents may
// use it. Once set up (mcp.yaml exists) a re-run asks one question: t to
// change the approved templates, n to see how to turn it off, Enter to
// keep everything. The retired mcp: section of config.yaml makes the step
// stand aside until mcp.yaml exists, and brings a reminder after.
func init() { initSteps = append(initSteps, mcpInitStep) }

func mcpInitStep(ctx context.Context, a *app, interactive bool) error {
	home, err := a.homeDir()
	if err != nil {
		return err
	}
	report, err := config.MCPStatus(home)
	if err != nil {
		return err
	}
	out := a.stdout
	switch report.Decision {
	case config.DecisionRefuse:
		fmt.Fprintf(out, "\nisx mcp: %s\n", report.Message())
		return nil
	case config.DecisionRemind:
		fmt.Fprintf(out, "\nReminder: %s\n", report.Message())
	}
	if !interactive {
		register := "claude " + shellWords(mcpAddArgs(registeredPath()))
		switch policy, err := config.LoadMCP(home); {
		case !report.MCPExists:
			fmt.Fprintf(out, "isx mcp (agents on this machine using isx) is not set up; run `isx init` without --non-interactive to set it up,\n"+
				"or approve templates in %s (templates: [tpl-dev]) and register it with Claude Code:\n  %s\n", report.MCPPath, register)
		case err != nil:
			a.warnf("isx mcp is set up, but refuses every call until mcp.yaml is fixed: %v", err)
		default:
			approved := "none"
			if len(policy.Templates) > 0 {
				approved = strings.Join(policy.Templates, ", ")
			}
			fmt.Fprintf(out, "isx mcp is set up (templates agents may use: %s). Claude Code reaches it once it is registered\n"+
				"(`isx doctor` checks):\n  %s\n", approved, register)
		}
		return nil
	}
	if !report.MCPExists {
		return a.setUpMCP(ctx, home)
	}
	return a.revisitMCP(ctx, home)
}

// setUpMCP offers the set-up; Enter leaves it off.
func (a *app) setUpMCP(ctx context.Context, home string) error {
	fmt.Fprint(a.stdout, "\nisx mcp lets an agent on this machine (Claude Code) make and use disposable instances\n"+
		"from templates you approve. It is experimental.\nSet up isx mcp? [y/N]: ")
	answer, err := readAnswer(a.stdin)
	if err != nil {
		return err
	}
	if !yes(answer) {
		fmt.Fprintln(a.stdout, "Left isx mcp off; run isx init again to set it up.")
		return nil
	}
	a.registerMCP(ctx)
	fmt.Fprint(a.stdout, permissionsAdvice)
	return a.approveTemplates(ctx, home, nil)
}

// permissionsAdvice is seed 001's: isx mcp runs as the user, so its limits
// hold for the MCP tools only, not for isx run through the agent's shell.
const permissionsAdvice = `isx mcp runs as you, so its limits hold for the MCP tools, not for an agent that
can also run isx through its shell. Allow the MCP tools and deny the rest in
Claude Code's settings (~/.claude/settings.json):
  {"permissions": {"allow": ["mcp__isx__*"],
    "deny": ["Bash(isx:*)", "Edit(~/.config/incus-spawn/**)", "Write(~/.config/incus-spawn/**)"]}}
`

// revisitMCP is the one question a re-run asks.
func (a *app) revisitMCP(ctx context.Context, home string) error {
	policy, err := config.LoadMCP(home)
	if err != nil {
		a.warnf("isx mcp is set up, but refuses every call until mcp.yaml is fixed: %v", err)
		fmt.Fprintln(a.stdout, "\nFix mcp.yaml, then run isx init again to change the approved templates.")
		return nil
	}
	approved := "none"
	if len(policy.Templates) > 0 {
		approved = strings.Join(policy.Templates, ", ")
	}
	fmt.Fprintf(a.stdout, "\nisx mcp is set up (templates agents may use: %s).\n"+
		"t: change the approved templates, n: how to turn it off, Enter: keep everything [t/n/Enter]: ", approved)
	answer, err := readAnswer(a.stdin)
	if err != nil {
		return err
	}
	switch strings.ToLower(answer) {
	case "t":
		return a.approveTemplates(ctx, home, policy.Templates)
	case "n":
		fmt.Fprintf(a.stdout, "To turn isx mcp off, remove its registration from Claude Code and delete mcp.yaml:\n"+
			"  claude mcp remove --scope user isx\n  rm %s\nNothing was changed.\n", config.MCPPath(home))
	case "":
		fmt.Fprintln(a.stdout, "Kept isx mcp as it is.")
	default:
		fmt.Fprintf(a.stdout, "Kept isx mcp as it is (%q is not t or n).\n", answer)
	}
	return nil
}

// mcpAddArgs registers isx mcp with Claude Code for all projects.
func mcpAddArgs(isx string) []string {
	return []string{"mcp", "add", "--scope", "user", "isx", "--", isx, "mcp"}
}

// registerMCP runs `claude mcp add --scope user isx -- <isx> mcp`, or says
// how to when Claude Code is not on PATH or refuses.
func (a *app) registerMCP(ctx context.Context) {
	isx := registeredPath()
	by := "claude " + shellWords(mcpAddArgs(isx))
	claude, err := exec.LookPath("claude")
	if err != nil {
		fmt.Fprintf(a.stdout, "Claude Code (claude) is not on PATH. To register isx mcp with it for all projects, run:\n  %s\n", by)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	output, err := exec.CommandContext(ctx, claude, mcpAddArgs(isx)...).CombinedOutput()
	switch {
	case err == nil:
		fmt.Fprintln(a.stdout, "Registered isx mcp with Claude Code for all projects.")
	case strings.Contains(string(output), "already exists"):
		fmt.Fprintln(a.stdout, "Claude Code already has an MCP server named isx; it was left as it is.")
	default:
		fmt.Fprintf(a.stdout, "Registering isx mcp with Claude Code failed (%v): %s\nRegister it by hand:\n  %s\n", err, strings.TrimSpace(string(output)), by)
	}
}

func shellWords(args []string) string {
	quoted := make([]string, len(args))
	for i, arg := range args {
		if arg == "" || strings.ContainsAny(arg, " \t\n'\"\\$`") {
			arg = "'" + strings.ReplaceAll(arg, "'", `'\''`) + "'"
		}
		quoted[i] = arg
	}
	return strings.Join(quoted, " ")
}

// mcpCandidate is a template isx init asks about.
type mcpCandidate struct {
	name  string
	tools []string
}

// approveTemplates asks about every candidate, keeping approvals of
// templates it does not ask about, and writes templates: to mcp.yaml.
func (a *app) approveTemplates(ctx context.Context, home string, current []string) error {
	candidates := a.mcpCandidates(ctx)
	approved := slices.Clone(current)
	if len(candidates) == 0 {
		fmt.Fprintln(a.stdout, "No trusted template installs Claude Code or Codex, so there is nothing to approve yet; run isx init again once one does.")
	}
	for _, c := range candidates {
		was := slices.Contains(current, c.name)
		hint := "[y/N]"
		if was {
			hint = "[Y/n]"
		}
		fmt.Fprintf(a.stdout, "May agents use %s (%s)? %s: ", c.name, strings.Join(c.tools, ", "), hint)
		answer, err := readAnswer(a.stdin)
		if err != nil {
			return err
		}
		allow := was
		if answer != "" {
			allow = yes(answer)
		}
		switch {
		case allow && !was:
			approved = append(approved, c.name)
		case !allow && was:
			approved = slices.DeleteFunc(approved, func(n string) bool { return n == c.name })
		}
	}
	if err := config.SaveMCPTemplates(home, approved); err != nil {
		return err
	}
	list := "none"
	if len(approved) > 0 {
		list = strings.Join(approved, ", ")
	}
	fmt.Fprintf(a.stdout, "Templates agents may use: %s (%s).\n", list, config.MCPPath(home))
	return nil
}

// mcpCandidates are the trusted templates, defined or built, whose agent
// tools include Claude Code or Codex, sorted by name.
func (a *app) mcpCandidates(ctx context.Context) []mcpCandidate {
	found := map[string][]string{}
	if set := a.templatesOrWarn(); set != nil {
		for _, d := range set.Definitions() {
			if set.Approvable(d.Name) != nil {
				continue
			}
			if tools := agentTools(chainToolNames(set, d.Name)); len(tools) > 0 {
				found[d.Name] = tools
			}
		}
	}
	if client, err := a.incus(); err == nil {
		entries, err := (&instance.Manager{Client: client}).List(ctx)
		if err != nil {
			a.warnf("listing built templates: %v", err)
		}
		for _, e := range entries {
			if !e.Stamps.IsTemplate() || e.Stamps.Source == string(template.SourceProjectLocal) || found[e.Name] != nil {
				continue
			}
			tools, err := e.Stamps.Tools()
			if err != nil {
				continue
			}
			var names []string
			for _, t := range tools {
				names = append(names, t.Name)
			}
			if agents := agentTools(names); len(agents) > 0 {
				found[e.Name] = agents
			}
		}
	}
	out := make([]mcpCandidate, 0, len(found))
	for name, tools := range found {
		out = append(out, mcpCandidate{name: name, tools: tools})
	}
	slices.SortFunc(out, func(x, y mcpCandidate) int { return strings.Compare(x.name, y.name) })
	return out
}

func chainToolNames(set *template.Set, name string) []string {
	chain, err := set.Chain(name)
	if err != nil {
		return nil
	}
	var names []string
	for _, d := range chain {
		for _, t := range d.Tools {
			if !slices.Contains(names, t.Name) {
				names = append(names, t.Name)
			}
		}
	}
	return names
}

// agentTools keeps the tools isx mcp can delegate to here: Claude Code and
// Codex.
func agentTools(names []string) []string {
	var out []string
	for _, n := range names {
		if (n == template.ToolClaude || n == template.ToolCodex) && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// readAnswer reads one line, a byte at a time, so that nothing after it is
// taken from stdin for later questions.
func readAnswer(r io.Reader) (string, error) {
	var line []byte
	buf := make([]byte, 1)
	for {
		n, err := r.Read(buf)
		if n == 1 {
			if buf[0] == '\n' {
				break
			}
			line = append(line, buf[0])
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("reading your answer: %w", err)
		}
	}
	return strings.TrimSpace(string(line)), nil
}

func yes(answer string) bool {
	switch strings.ToLower(answer) {
	case "y", "yes":
		return true
	}
	return false
}
