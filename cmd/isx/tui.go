package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/build"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/proxy"
	"github.com/incusspawn/isx/internal/isx/template"
	"github.com/incusspawn/isx/internal/isx/tui"
)

func newTUICommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "tui",
		Short: "Browse and manage templates and instances in a terminal UI",
		Long: "tui shows the templates and instances as `isx list` does, live, with keys to\n" +
			"branch, open a shell, start, stop, destroy and build. F3 shows an instance's\n" +
			"details, with its isx mcp state, purpose and holder; F4 is mission control,\n" +
			"every isx mcp instance and task of yours. `isx` alone on a terminal opens it.",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !onTerminal(a.stdin, a.stdout) {
				return coded.New(tui.CodeNoTerminal, "isx tui needs a terminal; `isx list` prints the same lists without one")
			}
			return a.runTUI(cmd.Context())
		},
	}
}

// runDefault is `isx` with no command: the TUI on a terminal, the help
// without one (in a pipe or a script).
func (a *app) runDefault(cmd *cobra.Command, _ []string) error {
	if !onTerminal(a.stdin, a.stdout) {
		return cmd.Help()
	}
	return a.runTUI(cmd.Context())
}

func onTerminal(in io.Reader, out io.Writer) bool {
	inFile, ok := in.(*os.File)
	if !ok {
		return false
	}
	outFile, ok := out.(*os.File)
	return ok && isTerminal(inFile) && isTerminal(outFile)
}

func (a *app) runTUI(ctx context.Context) error {
	ws, err := a.open()
	if err != nil {
		return err
	}
	backend := tuiBackend{a: a}
	err = tui.Run(ctx, tui.Options{
		Incus: ws.client, Lister: backend, Actions: backend, Clock: a.clock,
		Home: ws.home, Owner: ws.owner, Input: a.stdin, Output: a.stdout,
		Activities: proxyActivities{control: proxy.Connect(ws.home)},
	})
	if settleErr := a.settle(ws.client); settleErr != nil {
		a.warnf("cleaning up after the commands the TUI ran in instances: %v", settleErr)
	}
	return err
}

// settleTimeout bounds waiting, on the way out, for the clean-ups of what
// the TUI ran in instances (deleting exec logs); what is left then stays
// until its instance is deleted.
const settleTimeout = 5 * time.Second

func (a *app) settle(client *incus.Client) error {
	settled := make(chan error, 1)
	go func() { settled <- client.Settle() }()
	select {
	case err := <-settled:
		return err
	case <-a.clock.After(settleTimeout):
		return nil
	}
}

// tuiBackend is the isx commands for the TUI: each key runs the code of
// the command that does the same, with what it prints captured instead of
// written over the screen.
type tuiBackend struct{ a *app }

// quiet is the app with its output going to w, sharing the settings and
// the Incus client, and reading the template definitions afresh.
func (b tuiBackend) quiet(w io.Writer) *app {
	sub := *b.a
	sub.stdin, sub.stdout, sub.stderr = strings.NewReader(""), w, w
	sub.set, sub.setErr, sub.setRead = nil, nil, false
	return &sub
}

// Listing is what `isx list` collects, with each template's definition.
func (b tuiBackend) Listing(ctx context.Context) (*tui.Listing, error) {
	client, err := b.a.incus()
	if err != nil {
		return nil, err
	}
	out := &tui.Listing{}
	set, err := b.a.loadTemplates()
	if err != nil {
		out.Notes = append(out.Notes, fmt.Sprintf("template definitions could not be read, so isx cannot tell whether templates are stale: %v", err))
		set = nil
	}
	if set != nil {
		for _, w := range set.Warnings() {
			out.Notes = append(out.Notes, w.Message)
		}
		for _, broken := range set.Broken() {
			out.Notes = append(out.Notes, fmt.Sprintf("%v; isx leaves it out until it is fixed", broken.Err))
		}
	}
	l, err := collectListing(ctx, client, set)
	if err != nil {
		return nil, err
	}
	for _, row := range l.templates {
		out.Templates = append(out.Templates, templateOf(row, set))
	}
	out.Instances = l.instances
	return out, nil
}

func templateOf(row templateRow, set *template.Set) tui.Template {
	t := tui.Template{Name: row.name, Source: row.source, Status: row.status, Note: row.note}
	if set == nil {
		return t
	}
	d, err := set.Get(row.name)
	if err != nil {
		return t
	}
	t.Description, t.Path = d.Description, d.Source.Path
	if d.Parent != "" {
		t.From = "parent " + d.Parent
	} else {
		t.From = "image " + d.Image
	}
	if chain, err := set.Chain(row.name); err == nil {
		for _, tool := range template.MergeTools(chain) {
			t.Tools = append(t.Tools, tool.Name)
		}
	}
	return t
}

// Branch is `isx branch NAME --from FROM` with the network flag.
func (b tuiBackend) Branch(ctx context.Context, name, from string, network instance.Network) (string, error) {
	var out bytes.Buffer
	err := b.quiet(&out).runBranch(ctx, name, from, network, branchFlags{})
	return out.String(), err
}

// Build is `isx build TEMPLATE`, its progress going to progress.
func (b tuiBackend) Build(ctx context.Context, name string, progress io.Writer) (string, error) {
	var out bytes.Buffer
	cmd := &cobra.Command{}
	cmd.SetContext(ctx)
	err := b.quiet(io.MultiWriter(progress, &out)).runBuild(cmd, build.Request{Templates: []string{name}}, false)
	text := strings.TrimSpace(out.String())
	return text[strings.LastIndexByte(text, '\n')+1:], err
}

// stopTimeout is how long a stop from the TUI waits for a clean shutdown
// before it kills the instance, as isx mcp's stop_instance does.
const stopTimeout = 5 * time.Second

// Start starts an isx instance that is stopped.
func (b tuiBackend) Start(ctx context.Context, name string) (string, error) {
	client, err := b.instanceClient(ctx, name)
	if err != nil {
		return "", err
	}
	if err := client.StartInstance(ctx, name); err != nil {
		return "", err
	}
	return fmt.Sprintf("Started %s.", name), nil
}

// Stop stops an isx instance: cleanly if it shuts down within
// stopTimeout, else it is killed.
func (b tuiBackend) Stop(ctx context.Context, name string) (string, error) {
	client, err := b.instanceClient(ctx, name)
	if err != nil {
		return "", err
	}
	if err := client.StopInstance(ctx, name, incus.StopOptions{Force: true, Timeout: stopTimeout}); err != nil {
		return "", err
	}
	return fmt.Sprintf("Stopped %s.", name), nil
}

// instanceClient checks that name is an isx instance, not a template (which
// isx keeps stopped) nor someone else's.
func (b tuiBackend) instanceClient(ctx context.Context, name string) (*incus.Client, error) {
	client, err := b.a.incus()
	if err != nil {
		return nil, err
	}
	inst, _, err := client.GetInstance(ctx, name)
	if errors.Is(err, incus.ErrNotFound) {
		return nil, instance.NewError(instance.CodeNotFound, name, nil, "there is no instance named %s in project %s any more", name, client.ProjectName())
	}
	if err != nil {
		return nil, err
	}
	switch stamps := instance.ParseStamps(inst.Config); {
	case stamps.IsTemplate():
		return nil, instance.NewError(instance.CodeIsTemplate, name, nil, "%s is a template, which isx keeps stopped", name)
	case !stamps.Managed():
		return nil, instance.NewError(instance.CodeNotManaged, name, nil, "%s was not made by isx; use incus for it", name)
	}
	return client, nil
}

// Destroy is `isx destroy NAME`.
func (b tuiBackend) Destroy(ctx context.Context, name string) (string, error) {
	client, err := b.a.incus()
	if err != nil {
		return "", err
	}
	manager := &instance.Manager{Client: client, Clock: b.a.clock}
	// The TUI asked the person first, which is what --force stands for.
	if err := manager.Destroy(ctx, name, instance.DestroyOptions{Force: true}); err != nil {
		return "", err
	}
	return fmt.Sprintf("Destroyed %s.", name), nil
}

// Shell is `isx shell NAME` (or `isx shell --task TASK NAME`) on the
// terminal. The shell's own exit status is the person's business, not a
// failure.
func (b tuiBackend) Shell(ctx context.Context, name, taskID string, stdout, stderr io.Writer) error {
	sub := *b.a
	sub.stdout, sub.stderr = stdout, stderr
	sub.set, sub.setErr, sub.setRead = nil, nil, false
	err := sub.runShell(ctx, name, taskID)
	var exit exitError
	if errors.As(err, &exit) {
		return nil
	}
	return err
}

// proxyActivities is the TUI's view of the host proxy: the proxy's own
// stream of counts, read in the TUI's terms.
type proxyActivities struct{ control *proxy.Control }

func (p proxyActivities) Watch(ctx context.Context) (<-chan map[string]tui.Activity, error) {
	reports, err := p.control.Watch(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan map[string]tui.Activity)
	go func() {
		defer close(out)
		for report := range reports {
			counts := make(map[string]tui.Activity, len(report.Instances))
			for _, a := range report.Instances {
				if a.Known() {
					counts[a.Instance] = tuiActivity(a)
				}
			}
			select {
			case out <- counts:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// tuiActivity converts one instance's counts; a time the proxy sent that
// does not parse is left out, as the proxy leaves out one it does not have.
func tuiActivity(a proxy.Activity) tui.Activity {
	out := tui.Activity{
		InputTokens: a.InputTokens, OutputTokens: a.OutputTokens,
		CacheReadInputTokens: a.CacheReadInputTokens, CacheCreationInputTokens: a.CacheCreationInputTokens,
		Requests: a.Requests, RequestsInFlight: a.RequestsInFlight,
		TokensPerMinute: a.TokensPerMinute,
	}
	out.CountingSince, _ = proxy.ParseTime(a.CountingSince)
	out.LastRequestAt, _ = proxy.ParseTime(a.LastRequestAt)
	out.LastResponseAt, _ = proxy.ParseTime(a.LastResponseAt)
	if a.IdleSeconds != nil {
		out.IdleSeconds = *a.IdleSeconds
	}
	return out
}
