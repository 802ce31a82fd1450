package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/build"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/proxy"
	"github.com/incusspawn/isx/internal/isx/template"
)

// What a doctor check found.
const (
	statusOK   = "ok"
	statusWarn = "warn"
	statusFail = "fail"
	statusSkip = "skip" // could not be checked, because an earlier check failed
)

// finding is one line of isx doctor.
type finding struct {
	Check   string `json:"check"`
	Status  string `json:"status"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
}

func failed(check string, err error) finding {
	return finding{Check: check, Status: statusFail, Message: err.Error(), Hint: coded.HintOf(err)}
}

// doctor is one run of the checks; later checks read what earlier ones
// found.
type doctor struct {
	a      *app
	home   string
	cfg    *config.Config
	client *incus.Client // nil when Incus does not answer
	set    *template.Set // nil when the definitions cannot be read
	mcp    *config.MCP   // nil when mcp.yaml is missing or unusable
	found  []finding
}

func (d *doctor) add(f ...finding) { d.found = append(d.found, f...) }

// doctorChecks run in order.
var doctorChecks = []func(*doctor, context.Context){
	(*doctor).checkIncus,
	(*doctor).checkProject,
	(*doctor).checkTemplates,
	(*doctor).checkImages,
	(*doctor).checkMCPFile,
	(*doctor).checkProxy,
	(*doctor).checkClaude,
}

func newDoctorCommand(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor [--json]",
		Short: "Check everything isx needs, at once",
		Long: "doctor checks, in one go, what isx needs and says what to do about what is\n" +
			"wrong: that Incus answers, that the project exists, that the template definitions\n" +
			"can be read (and which are built or stale), that their root images are in the\n" +
			"project, that mcp.yaml is usable, the host proxy, and that Claude Code has isx mcp\n" +
			"registered and reaches it. It changes nothing, and exits 1 when a check fails.",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			found, err := a.runDoctor(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				if err := writeJSON(a.stdout, found); err != nil {
					return err
				}
			} else {
				writeFindings(a.stdout, found)
			}
			if n := count(found, statusFail); n > 0 {
				return coded.New(codeDoctorFailed, "%d of isx doctor's checks failed", n)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return cmd
}

// codeDoctorFailed: at least one check failed.
const codeDoctorFailed = "checks_failed"

func (a *app) runDoctor(ctx context.Context) ([]finding, error) {
	home, err := a.homeDir()
	if err != nil {
		return nil, err
	}
	d := &doctor{a: a, home: home}
	d.cfg, err = a.config()
	if err != nil {
		return []finding{failed("config.yaml", err)}, nil
	}
	// The checks say what they find; the warnings loading prints would
	// only say it twice.
	a.quiet = true
	for _, check := range doctorChecks {
		check(d, ctx)
	}
	return d.found, nil
}

func writeFindings(w interface{ Write([]byte) (int, error) }, found []finding) {
	for _, f := range found {
		fmt.Fprintf(w, "%-4s  %-9s  %s\n", f.Status, f.Check, f.Message)
		if f.Hint != "" {
			fmt.Fprintf(w, "%17s%s\n", "hint: ", f.Hint)
		}
	}
	switch fails, warns := count(found, statusFail), count(found, statusWarn); {
	case fails == 0 && warns == 0:
		fmt.Fprintln(w, "\nEverything isx needs is in place.")
	default:
		fmt.Fprintf(w, "\n%d failed, %d to look at.\n", fails, warns)
	}
}

func count(found []finding, status string) int {
	n := 0
	for _, f := range found {
		if f.Status == status {
			n++
		}
	}
	return n
}

func (d *doctor) checkIncus(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	client, err := d.a.incus()
	if err != nil {
		d.add(failed("incus", err))
		return
	}
	server, err := client.Server(ctx)
	if err != nil {
		d.add(failed("incus", err))
		return
	}
	d.client = client
	d.add(finding{Check: "incus", Status: statusOK, Message: fmt.Sprintf("Incus %s answers on %s", server.Environment.ServerVersion, d.a.socketSetting(d.cfg).named())})
}

func (d *doctor) checkProject(ctx context.Context) {
	project, origin := d.a.projectSetting(d.cfg)
	if d.client == nil {
		d.add(finding{Check: "project", Status: statusSkip, Message: "project " + project + ": not checked, since Incus does not answer"})
		return
	}
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	if err := d.a.checkProject(ctx, d.client); err != nil {
		d.add(failed("project", err))
		d.client = nil // the checks after this one ask about the project's contents
		return
	}
	chosen := "config.yaml's"
	if origin != "" {
		chosen = origin + "'s, which overrides config.yaml's"
	}
	d.add(finding{Check: "project", Status: statusOK, Message: fmt.Sprintf("isx works in project %s (%s), which exists", project, chosen)})
}

func (d *doctor) checkTemplates(ctx context.Context) {
	set, err := d.a.templates()
	if err != nil {
		d.add(failed("templates", err))
		return
	}
	d.set = set
	for _, w := range set.Warnings() {
		d.add(finding{Check: "templates", Status: statusWarn, Message: w.Message})
	}
	for _, b := range set.Broken() {
		d.add(finding{Check: "templates", Status: statusWarn, Message: b.Err.Error(), Hint: "fix the file; until then isx leaves it out"})
	}
	summary := fmt.Sprintf("%d template(s) defined", len(set.Names()))
	if d.client == nil {
		d.add(finding{Check: "templates", Status: statusOK, Message: summary + " (whether they are built is not checked, since Incus does not answer)"})
		return
	}
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	l, err := collect(ctx, d.client, set, false)
	if err != nil {
		d.add(failed("templates", err))
		return
	}
	counts := map[string][]string{}
	for _, t := range l.templates {
		counts[t.status] = append(counts[t.status], t.name)
	}
	var parts []string
	for _, status := range []string{"built", "stale", "not built", "invalid", "built, no definition"} {
		if names := counts[status]; len(names) > 0 {
			parts = append(parts, fmt.Sprintf("%s: %s", status, strings.Join(names, ", ")))
		}
	}
	d.add(finding{Check: "templates", Status: statusOK, Message: summary + "; " + strings.Join(parts, "; ")})
	for _, note := range l.notes {
		d.add(finding{Check: "templates", Status: statusWarn, Message: note})
	}
}

// checkImages looks for the root image of every template that can be
// built, once per image.
func (d *doctor) checkImages(ctx context.Context) {
	if d.client == nil || d.set == nil {
		d.add(finding{Check: "images", Status: statusSkip, Message: "not checked, since Incus or the project or the templates are not usable"})
		return
	}
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	builder := &build.Builder{Client: d.client, Set: d.set}
	users := map[string][]string{} // root image → templates built on it
	var images []string
	problems := map[string]error{}
	for _, name := range d.set.Names() {
		chain, err := d.set.Chain(name)
		if err != nil {
			continue // checkTemplates has said so
		}
		image := chain[0].Image
		if _, seen := users[image]; !seen {
			images = append(images, image)
			problems[image] = builder.CheckImage(ctx, name)
		}
		users[image] = append(users[image], name)
	}
	var present []string
	for _, image := range images {
		if err := problems[image]; err != nil {
			f := failed("images", err)
			f.Message = fmt.Sprintf("%s (the root image of %s)", strings.TrimPrefix(f.Message, "template "+users[image][0]+": "), strings.Join(users[image], ", "))
			d.add(f)
			continue
		}
		present = append(present, image)
	}
	if len(present) > 0 {
		d.add(finding{Check: "images", Status: statusOK, Message: "project " + d.client.ProjectName() + " has " + strings.Join(present, ", ")})
	}
}

func (d *doctor) checkMCPFile(context.Context) {
	report, err := config.MCPStatus(d.home)
	if err != nil {
		d.add(failed("mcp.yaml", err))
		return
	}
	switch report.Decision {
	case config.DecisionRefuse:
		d.add(finding{Check: "mcp.yaml", Status: statusFail, Message: report.Message()})
		return
	case config.DecisionRemind:
		d.add(finding{Check: "mcp.yaml", Status: statusWarn, Message: report.Message()})
	}
	if !report.MCPExists {
		d.add(finding{Check: "mcp.yaml", Status: statusOK, Message: "isx mcp is not set up (no " + report.MCPPath + "): agents cannot use isx", Hint: "`isx init` offers to set it up"})
		return
	}
	policy, err := config.LoadMCP(d.home)
	if err != nil {
		f := failed("mcp.yaml", err)
		f.Hint = "isx mcp refuses every call until it is fixed"
		d.add(f)
		return
	}
	d.mcp = policy
	if len(policy.Templates) == 0 {
		d.add(finding{Check: "mcp.yaml", Status: statusWarn, Message: "mcp.yaml approves no template, so isx mcp offers agents nothing", Hint: "`isx init` asks which templates agents may use"})
		return
	}
	d.add(finding{Check: "mcp.yaml", Status: statusOK, Message: "approves " + strings.Join(policy.Templates, ", ")})
	if d.set == nil {
		return
	}
	for _, name := range policy.Templates {
		if err := d.set.Approvable(name); err != nil {
			d.add(finding{Check: "mcp.yaml", Status: statusWarn, Message: fmt.Sprintf("approved template %s cannot be used through MCP: %v", name, err)})
		}
	}
}

// checkProxy looks at the host proxy: accounts.yaml must be usable, since
// the proxy refuses to start otherwise; a proxy that is not running is
// fine (isx branch and isx mcp start it), one of another isx or project
// is pointed out.
func (d *doctor) checkProxy(ctx context.Context) {
	accounts, err := config.LoadAccounts(d.home)
	if err != nil {
		d.add(failed("proxy", err))
		return
	}
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	status, err := proxy.Connect(d.home).Status(ctx)
	switch {
	case proxy.IsNotRunning(err):
		d.add(finding{Check: "proxy", Status: statusOK, Message: fmt.Sprintf("the host proxy is not running; isx branch and isx mcp start it (%d account(s) in %s)", accounts.Count(), accounts.Path)})
		return
	case err != nil:
		d.add(failed("proxy", err))
		return
	}
	project := d.a.project(d.cfg)
	switch {
	case status.Project != project:
		d.add(finding{Check: "proxy", Status: statusWarn, Message: fmt.Sprintf("the host proxy (pid %d) serves project %s, not %s, so instances of %s reach nothing through it", status.PID, status.Project, project, project),
			Hint: "`isx proxy restart` starts it again in project " + project})
	case status.Version != build.Version:
		d.add(finding{Check: "proxy", Status: statusWarn, Message: fmt.Sprintf("the host proxy (pid %d) is isx %s, not this isx (%s)", status.PID, status.Version, build.Version),
			Hint: "`isx proxy restart` runs this isx's proxy (its counts start again from zero)"})
	default:
		d.add(finding{Check: "proxy", Status: statusOK, Message: fmt.Sprintf("the host proxy runs (pid %d, since %s) and serves %d instance(s) with %d account(s)", status.PID, status.StartedAt, status.Instances, status.Accounts)})
	}
}

// claudeTimeout bounds `claude mcp get isx`, which starts isx mcp to see
// that it answers.
const claudeTimeout = time.Minute

// checkClaude asks Claude Code for its isx server: registered, running
// this isx, and reached.
func (d *doctor) checkClaude(ctx context.Context) {
	if d.mcp == nil {
		d.add(finding{Check: "claude", Status: statusSkip, Message: "Claude Code's registration is not checked, since isx mcp is not set up or mcp.yaml is not usable"})
		return
	}
	self := registeredPath()
	register := "claude " + shellWords(mcpAddArgs(self))
	claude, err := exec.LookPath("claude")
	if err != nil {
		d.add(finding{Check: "claude", Status: statusWarn, Message: "Claude Code (claude) is not on PATH, so its registration of isx mcp cannot be checked", Hint: "register isx mcp with it by running `" + register + "`"})
		return
	}
	ctx, cancel := context.WithTimeout(ctx, claudeTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, claude, "mcp", "get", "isx").CombinedOutput()
	if err != nil {
		d.add(finding{Check: "claude", Status: statusWarn, Message: "Claude Code has no MCP server named isx: " + firstLine(string(out)), Hint: "register it with `" + register + "`"})
		return
	}
	fields := claudeFields(string(out))
	command := fields["Command"]
	if resolved, err := filepath.EvalSymlinks(command); err == nil {
		command = resolved
	}
	if command != self || fields["Args"] != "mcp" {
		d.add(finding{Check: "claude", Status: statusWarn, Message: fmt.Sprintf("Claude Code's isx runs `%s %s`, not this isx (%s mcp)", fields["Command"], fields["Args"], self),
			Hint: "`claude mcp remove --scope user isx`, then `" + register + "`"})
		return
	}
	if !strings.Contains(fields["Status"], "Connected") {
		d.add(finding{Check: "claude", Status: statusWarn, Message: "Claude Code has isx registered but does not reach it: " + strings.TrimSpace(fields["Status"]+" "+fields["Issue"])})
		return
	}
	d.add(finding{Check: "claude", Status: statusOK, Message: "Claude Code has isx mcp registered (" + strings.ToLower(fields["Scope"]) + ") and reaches it"})
}

// registeredPath is this isx as `claude mcp add` should name it.
func registeredPath() string {
	self, err := os.Executable()
	if err == nil {
		self, err = filepath.EvalSymlinks(self)
	}
	if err != nil {
		return "isx"
	}
	return self
}

// claudeFields reads the "Key: value" lines of `claude mcp get`.
func claudeFields(out string) map[string]string {
	fields := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		key, value, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && !strings.Contains(key, " ") {
			fields[key] = strings.TrimSpace(value)
		}
	}
	return fields
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}
