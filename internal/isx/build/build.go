// Package build builds template instances: for each template, parents
// first, it makes a build instance from the root image or the parent's
// template instance, boots it, creates the agent user (at the root),
// installs packages, writes files and the environment, runs the steps,
// stamps it and stops it, and only then puts it in place of the old
// template instance. A failing build leaves nothing behind. Status says
// whether a built template is stale.
package build

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/template"
)

// Defaults for Builder's timeouts.
const (
	DefaultStepTimeout = 30 * time.Minute
	DefaultBootTimeout = 2 * time.Minute
	// stopTimeout bounds a clean shutdown of a systemd build instance
	// before it is killed.
	stopTimeout = time.Minute
	// cleanupTimeout bounds deleting a failed build instance.
	cleanupTimeout = 2 * time.Minute
)

// The agent user every template has.
const (
	AgentUser = "agent"
	AgentUID  = 1000
	AgentGID  = 1000
	AgentHome = "/home/agent"
)

// Builder builds templates of Set in the project of Client.
type Builder struct {
	Client *incus.Client
	Set    *template.Set
	// Owner is the host user stamped on what is built.
	Owner string
	// Progress is told what the build does as it happens. When it is nil,
	// Out receives the same as lines (Lines); when both are nil, nothing
	// is shown.
	Progress Progress
	Out      io.Writer
	// Verbose also gives Progress every step's output, as it is printed.
	Verbose bool
	// Clock defaults to the real clock, Random (build instance suffixes)
	// to crypto/rand.
	Clock  clock.Clock
	Random io.Reader
	// StepTimeout bounds each step (DefaultStepTimeout when zero);
	// BootTimeout bounds waiting for a build instance to boot
	// (DefaultBootTimeout when zero).
	StepTimeout time.Duration
	BootTimeout time.Duration
	// NPMCache is the host's cache of npm package tarballs the agent tools
	// are installed from (NPMCacheDir of the user's home when empty).
	NPMCache string
	// Proxy and ProxyDir are the host proxy (config.ProxyDir) through which
	// a template whose tools name repositories clones them, with the
	// template's GitHub account. Without them such a template fails to
	// build, saying so.
	Proxy    Admitter
	ProxyDir string
}

// Admitter has the host proxy serve a running instance's current start.
type Admitter interface {
	Admit(ctx context.Context, instance string) error
}

// Request says what to build.
type Request struct {
	// Templates are the templates asked for. Each is built; so is every
	// parent that is not built or is stale.
	Templates []string
	// WithParents rebuilds every parent too, current or not.
	WithParents bool
	// All builds every template there is (Templates must be empty).
	All bool
}

// Result is one template built.
type Result struct {
	Template string
	Duration time.Duration
}

// Plan lists the templates req builds, parents before children, each
// once. It checks every chain (missing parents, cycles) and every root
// image before anything is built, so a request that cannot work creates
// nothing.
func (b *Builder) Plan(ctx context.Context, req Request) ([]string, error) {
	targets := req.Templates
	switch {
	case req.All && len(targets) > 0:
		return nil, failure(CodeInvalidRequest, "", nil, "name templates or give --all, not both")
	case req.All:
		targets = b.Set.Names()
	case len(targets) == 0:
		return nil, failure(CodeInvalidRequest, "", nil, "name the templates to build, or give --all")
	}
	chains := make([][]*template.Definition, 0, len(targets))
	for _, name := range targets {
		chain, err := b.Set.Chain(name)
		if err != nil {
			return nil, err
		}
		chains = append(chains, chain)
	}
	built, err := b.Client.InstancesByName(ctx)
	if err != nil {
		return nil, err
	}
	var plan []string
	considered := map[string]bool{}
	for _, chain := range chains {
		for _, d := range chain {
			if considered[d.Name] {
				continue
			}
			considered[d.Name] = true
			if !slices.Contains(targets, d.Name) && !req.WithParents {
				status, err := StatusOf(built[d.Name], b.Set, d.Name)
				if err != nil {
					return nil, err
				}
				if status.Built && !status.Stale {
					continue
				}
			}
			plan = append(plan, d.Name)
		}
		if root := chain[0]; slices.Contains(plan, root.Name) {
			if err := b.checkImage(ctx, root); err != nil {
				return nil, err
			}
		}
	}
	return plan, nil
}

// Build builds what Plan lists, in order, and stops at the first failure.
// The templates built before it stay built.
func (b *Builder) Build(ctx context.Context, req Request) ([]Result, error) {
	plan, err := b.Plan(ctx, req)
	if err != nil {
		return nil, err
	}
	var results []Result
	for i, name := range plan {
		b.line("==> [%d/%d] %s", i+1, len(plan), name)
		began := b.clock().Now()
		if err := b.BuildTemplate(ctx, name); err != nil {
			return results, err
		}
		took := b.clock().Now().Sub(began)
		b.line("==> %s built in %s", name, Round(took))
		results = append(results, Result{Template: name, Duration: took})
	}
	return results, nil
}

// BuildTemplate builds one template whose parent (if any) is built.
func (b *Builder) BuildTemplate(ctx context.Context, name string) (err error) {
	def, err := b.Set.Get(name)
	if err != nil {
		return err
	}
	chain, err := b.Set.Chain(name)
	if err != nil {
		return err
	}
	if err := b.checkName(ctx, name); err != nil {
		return err
	}
	suffix, err := b.suffix()
	if err != nil {
		return err
	}
	job := &job{Builder: b, def: def, chain: chain, instance: name + "--build-" + suffix, suffix: suffix}
	create, err := job.createRequest(ctx)
	if err != nil {
		return err
	}
	var createErr error
	booted := job.phase("make "+job.instance+" from "+job.from, func() error {
		if createErr = b.Client.CreateInstance(ctx, create); createErr != nil {
			return createErr
		}
		return job.waitBoot(ctx)
	})
	if errors.Is(createErr, incus.ErrUnavailable) {
		return createErr // nothing reached Incus, so nothing was made
	}
	// From here on a failure removes the build instance, which the create
	// may have made even when it failed (a start can fail after the copy).
	defer func() {
		if err != nil {
			err = errors.Join(err, job.discard(ctx))
		}
	}()
	switch {
	case createErr != nil:
		return failure(CodeBuildFailed, name, createErr, "making the build instance %s", job.instance)
	case booted != nil:
		return booted
	}
	return job.run(ctx)
}

// checkName refuses to build over an instance that is not a template.
func (b *Builder) checkName(ctx context.Context, name string) error {
	inst, _, err := b.Client.GetInstance(ctx, name)
	if errors.Is(err, incus.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if !instance.ParseStamps(inst.Config).IsTemplate() {
		return failure(CodeNameTaken, name, nil, "instance %s exists and is not a template isx built, so isx will not replace it; rename or destroy it first", name)
	}
	return nil
}

const suffixAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// suffix is five random letters and digits.
func (b *Builder) suffix() (string, error) {
	random := b.Random
	if random == nil {
		random = rand.Reader
	}
	raw := make([]byte, 5)
	if _, err := io.ReadFull(random, raw); err != nil {
		return "", fmt.Errorf("reading random bytes for the build instance's name: %w", err)
	}
	for i, c := range raw {
		raw[i] = suffixAlphabet[int(c)%len(suffixAlphabet)]
	}
	return string(raw), nil
}

func (b *Builder) clock() clock.Clock {
	if b.Clock == nil {
		return clock.Real{}
	}
	return b.Clock
}

// line tells Progress a line about the build.
func (b *Builder) line(format string, args ...any) {
	b.progress().Line(fmt.Sprintf(format, args...))
}

func (b *Builder) progress() Progress {
	switch {
	case b.Progress != nil:
		return b.Progress
	case b.Out != nil:
		b.Progress = Lines(b.Out)
		return b.Progress
	}
	return discard{}
}

func (b *Builder) stepTimeout() time.Duration {
	if b.StepTimeout > 0 {
		return b.StepTimeout
	}
	return DefaultStepTimeout
}

func (b *Builder) bootTimeout() time.Duration {
	if b.BootTimeout > 0 {
		return b.BootTimeout
	}
	return DefaultBootTimeout
}

func (b *Builder) npmCache() string {
	if b.NPMCache != "" {
		return b.NPMCache
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.TempDir()
	}
	return NPMCacheDir(home)
}

// Round shortens a duration for a person: to a tenth of a second above a
// second, to a millisecond below.
func Round(d time.Duration) time.Duration {
	if d > time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}
