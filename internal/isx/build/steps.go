package build

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/template"
)

// step is one shell script run in the build instance.
type step struct {
	label  string
	index  int // 1-based among the template's steps; 0 for isx's own
	of     int
	script string
	user   string // template.UserRoot (default) or template.UserAgent
}

func (s step) tag() string {
	if s.index == 0 {
		return "[isx]"
	}
	return fmt.Sprintf("[%d/%d]", s.index, s.of)
}

// step runs a script with sh -e, as root in /root or as the agent in its
// home, and turns a non-zero exit into a *StepError carrying the output.
// Progress hears of it as it starts and ends, and under Verbose is given
// its output as it is printed.
func (j *job) step(ctx context.Context, s step) error {
	req := incus.ExecRequest{
		Command: []string{"sh", "-e", "-c", s.script},
		Cwd:     "/root",
		Env:     map[string]string{"HOME": "/root", "USER": "root", "LOGNAME": "root"},
		Timeout: j.stepTimeout(),
	}
	if s.user == template.UserAgent {
		req.UID, req.GID, req.Cwd = AgentUID, AgentGID, AgentHome
		req.Env = map[string]string{"HOME": AgentHome, "USER": AgentUser, "LOGNAME": AgentUser}
	}
	shown := Step{Template: j.def.Name, Tag: s.tag(), Label: s.label}
	progress := j.progress()
	if j.Verbose {
		out := stepOutput{progress, shown}
		req.Stdout, req.Stderr = out, out
	}
	progress.StepStarted(shown)
	began := j.clock().Now()
	result, err := j.Client.Exec(ctx, j.instance, req)
	end := StepEnd{Took: j.clock().Now().Sub(began), Err: err}
	if result != nil {
		end.ExitCode, end.TimedOut = result.ExitCode, result.TimedOut
	}
	progress.StepEnded(shown, end)
	if err != nil {
		return failure(CodeBuildFailed, j.def.Name, err, "running step %q", s.label)
	}
	if end.Failed() {
		return &StepError{Base: coded.Base{Code: CodeStepFailed}, Template: j.def.Name, Step: s.label, Index: s.index, ExitCode: result.ExitCode,
			TimedOut: result.TimedOut, Stdout: result.Stdout, Stderr: result.Stderr, Shown: j.Verbose}
	}
	return nil
}

// stepOutput hands a step's output to Progress as the exec follows it.
type stepOutput struct {
	progress Progress
	step     Step
}

func (o stepOutput) Write(p []byte) (int, error) {
	o.progress.StepOutput(o.step, p)
	return len(p), nil
}

// Output is the step's output as a person reads it: stdout, then stderr,
// each under a heading.
func (e *StepError) Output() string {
	var b strings.Builder
	fmt.Fprintf(&b, "--- output of step %q (stdout) ---\n", e.Step)
	b.Write(e.Stdout)
	if len(e.Stdout) > 0 && !bytes.HasSuffix(e.Stdout, []byte("\n")) {
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "--- output of step %q (stderr) ---\n", e.Step)
	b.Write(e.Stderr)
	if len(e.Stderr) > 0 && !bytes.HasSuffix(e.Stderr, []byte("\n")) {
		b.WriteByte('\n')
	}
	b.WriteString("--- end of output ---\n")
	return b.String()
}

// waitBoot waits until the build instance answers exec and, when its
// init is systemd, until systemd has finished starting up (or BootTimeout
// passed, after which the build goes on with a warning).
func (j *job) waitBoot(ctx context.Context) error {
	deadline := j.clock().Now().Add(j.bootTimeout())
	for {
		result, err := j.Client.Exec(ctx, j.instance, incus.ExecRequest{Command: []string{"cat", "/proc/1/comm"}, Timeout: 10 * time.Second})
		if err == nil && result.ExitCode == 0 {
			j.systemd = strings.TrimSpace(string(result.Stdout)) == "systemd"
			break
		}
		if err := j.pause(ctx, deadline); err != nil {
			return failure(CodeBuildFailed, j.def.Name, err, "the build instance %s did not answer within %s of starting", j.instance, j.bootTimeout())
		}
	}
	if !j.systemd {
		return nil
	}
	for {
		left := deadline.Sub(j.clock().Now())
		result, err := j.Client.Exec(ctx, j.instance, incus.ExecRequest{
			Command: []string{"systemctl", "is-system-running", "--wait"},
			Timeout: max(left, time.Second),
		})
		if err == nil {
			switch state := strings.TrimSpace(string(result.Stdout)); state {
			case "running":
				return nil
			case "degraded":
				j.line("    systemd reports the system degraded (a unit failed); building anyway")
				return nil
			}
		}
		if err := j.pause(ctx, deadline); err != nil {
			j.line("    systemd did not finish starting within %s; building anyway", j.bootTimeout())
			return nil
		}
	}
}

var errDeadline = errors.New("deadline passed")

// pause waits a moment before another try, or says the deadline passed.
func (j *job) pause(ctx context.Context, deadline time.Time) error {
	if !j.clock().Now().Before(deadline) {
		return errDeadline
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-j.clock().After(200 * time.Millisecond):
		return nil
	}
}

// Marks around isx's part of /etc/environment.
const (
	envBegin = "# BEGIN isx template environment (rewritten by isx build)"
	envEnd   = "# END isx template environment"
)

// writeEnv makes the chain's environment visible everywhere: as Incus
// environment.* config (every exec, so isx's own and MCP's commands, and
// inherited by branches), in /etc/environment (PAM logins) and in
// /etc/profile.d/isx.sh (login shells). Only templates with env of their
// own write it; the others inherit their parent's.
func (j *job) writeEnv(ctx context.Context) error {
	if len(j.def.Env) == 0 {
		return nil
	}
	env := j.mergedEnv()
	config := map[string]string{}
	for k, v := range env {
		config["environment."+k] = v
	}
	if err := j.Client.PatchInstance(ctx, j.instance, "", incus.InstancePatch{Config: config}); err != nil {
		return failure(CodeBuildFailed, j.def.Name, err, "setting the environment")
	}
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	sort.Strings(names)
	current, err := j.Client.PullFile(ctx, j.instance, "/etc/environment")
	if errors.Is(err, incus.ErrNotFound) {
		current, err = nil, nil
	}
	if err != nil {
		return failure(CodeBuildFailed, j.def.Name, err, "reading /etc/environment")
	}
	files := map[string]string{
		"/etc/environment":      etcEnvironment(string(current), names, env),
		"/etc/profile.d/isx.sh": profileScript(names, env),
	}
	for _, path := range []string{"/etc/environment", "/etc/profile.d/isx.sh"} {
		err := j.Client.PushFile(ctx, j.instance, path, strings.NewReader(files[path]), incus.FileOptions{Mode: 0o644, MakeParents: true})
		if err != nil {
			return failure(CodeBuildFailed, j.def.Name, err, "writing %s", path)
		}
	}
	j.line("    set the environment: %s", strings.Join(names, ", "))
	return nil
}

// etcEnvironment replaces isx's block in /etc/environment. pam_env reads
// one line per variable with no escapes, so a value holding a newline, a
// quote or a backslash is left to the other two places.
func etcEnvironment(current string, names []string, env map[string]string) string {
	var kept []string
	inBlock := false
	for _, line := range strings.Split(strings.TrimRight(current, "\n"), "\n") {
		switch {
		case line == envBegin:
			inBlock = true
		case line == envEnd:
			inBlock = false
		case !inBlock && line != "":
			kept = append(kept, line)
		}
	}
	kept = append(kept, envBegin)
	for _, k := range names {
		if v := env[k]; !strings.ContainsAny(v, "\n\r\"\\") {
			kept = append(kept, k+"=\""+v+"\"")
		}
	}
	kept = append(kept, envEnd)
	return strings.Join(kept, "\n") + "\n"
}

func profileScript(names []string, env map[string]string) string {
	var b strings.Builder
	b.WriteString("# Written by isx build from the template's env.\n")
	for _, k := range names {
		fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(env[k]))
	}
	return b.String()
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// stamp marks the build instance as the template it now is.
func (j *job) stamp(ctx context.Context) error {
	hash, err := DefinitionHash(j.Set, j.def.Name)
	if err != nil {
		return err
	}
	source, err := j.Set.EffectiveSource(j.def.Name)
	if err != nil {
		return err
	}
	tools, err := instance.EncodeTools(instance.ToolsOf(template.MergeTools(j.chain)))
	if err != nil {
		return err
	}
	stamps := instance.Stamps{
		Type:           instance.TypeBase,
		Template:       j.def.Name,
		DefinitionHash: hash,
		Version:        Version,
		Source:         string(source),
		Owner:          j.Owner,
		Created:        j.clock().Now(),
		Network:        instance.NetworkDefault,
		ToolsJSON:      tools,
	}
	if err := j.Client.PatchInstance(ctx, j.instance, "", incus.InstancePatch{Config: stamps.Config()}); err != nil {
		return failure(CodeBuildFailed, j.def.Name, err, "stamping the build instance")
	}
	return nil
}

// stop shuts the build instance down: cleanly under systemd, killed
// otherwise (busybox's init ignores the shutdown signal; what was written
// is on disk either way).
func (j *job) stop(ctx context.Context) error {
	opts := incus.StopOptions{Force: true}
	if j.systemd {
		opts.Timeout = stopTimeout
	}
	if err := j.Client.StopInstance(ctx, j.instance, opts); err != nil {
		return failure(CodeBuildFailed, j.def.Name, err, "stopping the build instance")
	}
	return nil
}

// replace puts the stopped build instance in place of the template
// instance: the old one is renamed aside first and renamed back if the
// new one cannot take its name, so there is always a template instance.
func (j *job) replace(ctx context.Context) error {
	name := j.def.Name
	old, _, err := j.Client.GetInstance(ctx, name)
	if errors.Is(err, incus.ErrNotFound) {
		if err := j.Client.RenameInstance(ctx, j.instance, name); err != nil {
			return failure(CodeBuildFailed, name, err, "renaming the build instance")
		}
		return nil
	}
	if err != nil {
		return err
	}
	if !instance.ParseStamps(old.Config).IsTemplate() {
		return failure(CodeNameTaken, name, nil, "instance %s appeared during the build and is not a template isx built; rename or destroy it", name)
	}
	if old.Running() {
		if err := j.Client.StopInstance(ctx, name, incus.StopOptions{Force: true}); err != nil {
			return failure(CodeBuildFailed, name, err, "stopping the old template instance")
		}
	}
	aside := name + "--old-" + j.suffix
	if err := j.Client.RenameInstance(ctx, name, aside); err != nil {
		return failure(CodeBuildFailed, name, err, "moving the old template instance aside")
	}
	if err := j.Client.RenameInstance(ctx, j.instance, name); err != nil {
		restore := j.Client.RenameInstance(context.WithoutCancel(ctx), aside, name)
		return errors.Join(failure(CodeBuildFailed, name, err, "renaming the build instance"), restore)
	}
	if err := j.Client.DeleteInstance(ctx, aside, true); err != nil && !errors.Is(err, incus.ErrNotFound) {
		j.line("    warning: the old template instance %s could not be deleted (%v); delete it with `incus delete --force %s`", aside, err, aside)
	}
	return nil
}

// discard deletes the build instance after a failure, whatever ctx says.
func (j *job) discard(ctx context.Context) error {
	cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	err := j.Client.DeleteInstance(cleanup, j.instance, true)
	if err == nil || errors.Is(err, incus.ErrNotFound) {
		j.line("    removed the build instance %s", j.instance)
		return nil
	}
	return fmt.Errorf("the build instance %s could not be removed; delete it with `incus delete --force %s`: %w", j.instance, j.instance, err)
}
