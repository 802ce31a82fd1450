package task

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/coded"
)

// Starter makes tasks. It holds the clock that dates them and the random
// source their ids come from.
type Starter struct {
	clock  clock.Clock
	random io.Reader
}

// NewStarter returns a Starter that dates tasks with clk and draws their
// ids from random.
func NewStarter(clk clock.Clock, random io.Reader) *Starter {
	return &Starter{clock: clk, random: random}
}

// Started is the outcome of Start.
type Started struct {
	Status Info // the task as read right after it started
	// Replayed: the key already had this task, so nothing new was made
	// (ISX-159, ISX-160).
	Replayed bool
}

// Start makes a task in the instance and starts its first run, returning
// once the command runs (ISX-062). The record, with the key, is written
// before the run starts. A Start whose key already made a task returns that
// task with Replayed set, and starts its run if an interrupted Start never
// did; a key that made a task of another kind is refused (ISX-167).
//
// On an instance with systemd the run is a transient unit, started in the
// same exec as the record is written; without systemd (or without setpriv)
// it is a detached process group, started by a second exec as the agent.
func (s *Starter) Start(ctx context.Context, ex Executor, instance string, spec Spec) (*Started, error) {
	if err := spec.validate(); err != nil {
		return nil, withInstance(err, instance)
	}
	return s.create(ctx, ex, instance, spec, "")
}

// create writes the record and starts the run. A test can stop it short,
// as a crash would: crashAfter modeNone writes the record alone,
// modeSystemd runs the agent's part of a unit start (record, mode and
// run.json) without the unit. Otherwise crashAfter is empty.
func (s *Starter) create(ctx context.Context, ex Executor, instance string, spec Spec, crashAfter string) (*Started, error) {
	if err := spec.validateFields(); err != nil {
		return nil, withInstance(err, instance)
	}
	id, err := NewID(s.random)
	if err != nil {
		return nil, wrapError(CodeInternal, instance, "", err, "cannot make a task id")
	}
	prep, err := newPreparation(id, spec, s.clock.Now().UTC())
	if err != nil {
		return nil, withInstance(err, instance)
	}
	if crashAfter != "" {
		out, err := run(ctx, ex, instance, "", script{text: libScript + prepareScript, args: prep.args(crashAfter), env: prep.env})
		if err != nil {
			return nil, err
		}
		out.exitCode = 0
		return startedFrom(out, instance, spec)
	}
	out, err := run(ctx, ex, instance, "", script{
		text: rootStartScript,
		args: append([]string{libScript + prepareScript, libScript + undoScript}, prep.args(modeSystemd)...),
		root: true,
		env:  prep.env,
	})
	if err != nil {
		return nil, err
	}
	if out.exitCode == exitNoUnits {
		out, err = run(ctx, ex, instance, "", script{text: libScript + prepareScript, args: prep.args(modeProcess), env: prep.env})
		if err != nil {
			return nil, err
		}
	}
	return startedFrom(out, instance, spec)
}

func startedFrom(out *scriptRun, instance string, spec Spec) (*Started, error) {
	if out.exitCode != 0 || len(out.tasks) != 1 {
		return nil, newError(CodeInternal, instance, "", "starting a task in instance %q gave no account of the task", instance)
	}
	started := &Started{Status: out.tasks[0].status()}
	_, started.Replayed = out.words["replayed"]
	if started.Replayed && started.Status.Kind() != spec.Kind {
		return nil, newError(CodeInvalidArgument, instance, started.Status.ID,
			"idempotency key %q already made task %s, a %s task, not a %s task: a repeat must ask for the same kind of task; use another key",
			spec.Key, started.Status.ID, started.Status.Kind(), spec.Kind)
	}
	if started.Status.State == StateLost {
		return nil, newError(CodeInternal, instance, started.Status.ID, "task %s in instance %q has no readable record right after it was made", started.Status.ID, instance)
	}
	return started, nil
}

// preparation is what prepareScript receives for one Start.
type preparation struct {
	id, key, kind, cwd string
	record             string
	command            string
	env                map[string]string
	now                time.Time
}

func newPreparation(id string, spec Spec, now time.Time) (*preparation, error) {
	cwd := spec.Cwd
	if cwd == "" {
		cwd = AgentHome
	}
	names := make([]string, 0, len(spec.Env))
	for name := range spec.Env {
		names = append(names, name)
	}
	sort.Strings(names)
	rec := Record{
		Version: RecordVersion, ID: id, Kind: spec.Kind, Command: spec.Command, Cwd: cwd,
		EnvNames: names, Key: spec.Key, Created: now, Session: spec.Session, Delegate: spec.Delegate,
	}
	recordJSON, err := marshal(rec)
	if err != nil {
		return nil, err
	}
	p := &preparation{
		id: id, key: spec.Key, kind: string(spec.Kind), cwd: cwd,
		record:  recordJSON,
		command: commandFile(cwd, spec.Command),
		env:     map[string]string{"ISX_TASK_ENV": envFile(spec.Env)},
		now:     now,
	}
	for what, text := range map[string]string{"record": p.record, "command": p.command, "environment": p.env["ISX_TASK_ENV"]} {
		if len(text) > maxArgBytes {
			return nil, newError(CodeInvalidArgument, "", "", "the task's %s is %d bytes once encoded, more than the %d one exec can carry", what, len(text), maxArgBytes)
		}
	}
	return p, nil
}

// args are prepareScript's arguments for a run started in mode.
func (p *preparation) args(mode string) []string {
	info := runInfo{Run: 1, Mode: mode, Started: p.now}
	if mode == modeSystemd {
		info.Unit = UnitName(p.id, 1)
	}
	infoJSON, err := marshal(info)
	if err != nil {
		// runInfo holds only an int, strings and a time: it always encodes.
		panic(err)
	}
	return []string{p.id, p.key, p.kind, p.cwd, mode, p.record, p.command, runnerScript, infoJSON}
}

// marshal encodes v as one line of JSON, without HTML escaping (the text is
// only ever read back by isx).
func marshal(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", fmt.Errorf("task: encoding %T: %w", v, err)
	}
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n"))), nil
}

// withInstance fills in the instance of a validation error.
func withInstance(err error, instance string) error {
	if e, ok := err.(*coded.Error); ok {
		e.On("instance", instance)
	}
	return err
}
