package task

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/incusspawn/isx/internal/isx/incus"
)

// Executor runs a command in an instance; *incus.Client is one.
type Executor interface {
	Exec(ctx context.Context, instance string, req incus.ExecRequest) (*incus.ExecResult, error)
}

// How long one script may take, beyond any waiting it was asked to do.
const scriptTimeout = 30 * time.Second

// Exit codes the scripts use besides 0 and 1 (an "error" line says why).
const (
	exitLaunch  = 3  // the prepare step asks for a unit (root scripts handle it)
	exitNoUnits = 10 // a root script found no systemd: use the agent path
)

// script is one exec of a shell script.
type script struct {
	text      string
	args      []string
	root      bool
	env       map[string]string
	timeout   time.Duration
	maxOutput int64
}

// scriptRun is what a script printed and how it ended.
type scriptRun struct {
	*answer
	exitCode int
	stdout   string
	stderr   []byte
}

// run executes s and parses its output. An "error" line becomes a coded error
// with its code; an exit code other than 0 (and exitNoUnits, exitLaunch,
// which the callers handle) without one is internal.
func run(ctx context.Context, ex Executor, instance, taskID string, s script) (*scriptRun, error) {
	req := incus.ExecRequest{
		Command:        append([]string{"sh", "-c", s.text, "isx-task"}, s.args...),
		Env:            s.env,
		Cwd:            "/",
		Timeout:        s.timeout,
		MaxOutputBytes: s.maxOutput,
	}
	if req.Timeout == 0 {
		req.Timeout = scriptTimeout
	}
	if !s.root {
		req.UID, req.GID = AgentUID, AgentGID
	}
	res, err := ex.Exec(ctx, instance, req)
	if err != nil {
		return nil, execError(instance, taskID, err)
	}
	if res.TimedOut {
		return nil, newError(CodeUnavailable, instance, taskID, "instance %q did not answer within %s; it may be overloaded, retry", instance, req.Timeout)
	}
	out := &scriptRun{exitCode: res.ExitCode, stdout: string(res.Stdout), stderr: res.Stderr}
	if res.Truncated && res.StdoutBytes > int64(len(res.Stdout)) {
		return nil, newError(CodeInternal, instance, taskID, "instance %q answered with more than %d bytes", instance, len(res.Stdout))
	}
	text, _, _ := splitOutput(out.stdout)
	a, err := parseAnswer(text)
	if err != nil {
		return nil, wrapError(CodeInternal, instance, taskID, err, "the task script in instance %s answered in a way isx does not understand", quoteName(instance))
	}
	out.answer = a
	if a.errCode != "" {
		code := a.errCode
		switch code {
		case CodeInvalidArgument, CodeNotFound, CodeWrongState, CodeBusy, CodeUnavailable, CodeInternal:
		default:
			code = CodeInternal
		}
		return nil, newError(code, instance, taskID, "%s (instance %s)", a.errText, quoteName(instance))
	}
	switch res.ExitCode {
	case 0, exitLaunch, exitNoUnits:
		return out, nil
	}
	return nil, wrapError(CodeInternal, instance, taskID, errors.New(strings.TrimSpace(Clip(string(res.Stderr)+" "+string(res.Stdout), 500))), "the task script in instance %q failed with exit code %d", instance, res.ExitCode)
}

// splitOutput separates the machine-readable part of a script's output from
// the raw log text Result prints after outputSeparator (hasLog says whether
// there was any).
func splitOutput(stdout string) (answer, log string, hasLog bool) {
	if strings.HasPrefix(stdout, outputSeparator+"\n") {
		return "", stdout[len(outputSeparator)+1:], true
	}
	if i := strings.Index(stdout, "\n"+outputSeparator+"\n"); i >= 0 {
		return stdout[:i+1], stdout[i+len(outputSeparator)+2:], true
	}
	return stdout, "", false
}

// outputSeparator is the line resultScript prints before the log's tail.
const outputSeparator = "--output--"

func quoteName(s string) string { return `"` + s + `"` }
