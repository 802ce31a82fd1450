package tui

import (
	"context"
	"errors"
	"io"
	"os"

	tea "charm.land/bubbletea/v2"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/coded"
)

// Options are what the TUI works with.
type Options struct {
	Incus   Incus
	Lister  Lister
	Actions Actions
	// Activities is the host proxy's view of the instances; nil until the
	// proxy exists, and the TUI says "no proxy".
	Activities Activities
	Clock      clock.Clock
	// Home is the user's home, where isx shell records who is in an
	// instance.
	Home string
	// Owner is the host user whose MCP instances mission control shows.
	Owner string
	// Input and Output are the terminal (os.Stdin and os.Stdout when nil).
	Input  io.Reader
	Output io.Writer
}

// Codes of the TUI's errors.
const (
	// CodeNoTerminal: the TUI was started without a terminal to draw on.
	CodeNoTerminal = "no_terminal"
	// CodeTerminal: the terminal could not be set up or drawn on.
	CodeTerminal = "terminal_failed"
	// CodeOptions: Run was called without what it needs (a programming
	// error in its caller).
	CodeOptions = "tui_options"
)

// framesPerSecond bounds how often the screen is redrawn. Bubble Tea's
// default of 60 costs an idle TUI about 1% of a core in wake-ups; 20 is
// smooth enough for lists that change when Incus says so.
const framesPerSecond = 20

// Run shows the TUI until the person quits or ctx ends.
func Run(ctx context.Context, opts Options) error {
	if opts.Input == nil {
		opts.Input = os.Stdin
	}
	if opts.Output == nil {
		opts.Output = os.Stdout
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Incus == nil || opts.Lister == nil || opts.Actions == nil {
		return coded.New(CodeOptions, "tui.Run needs Incus, Lister and Actions")
	}
	outer := ctx
	ctx, cancel := context.WithCancel(outer)
	defer cancel()
	rt := newRuntime(ctx)
	m := newModel(opts, rt)
	program := tea.NewProgram(m, tea.WithContext(ctx), tea.WithInput(opts.Input), tea.WithOutput(opts.Output), tea.WithFPS(framesPerSecond))
	rt.send = program.Send
	rt.watchEvents(opts.Incus, opts.Clock)
	rt.ticks(opts.Clock)
	if opts.Activities != nil {
		rt.watchActivity(opts.Activities, opts.Clock)
	}
	_, err := program.Run()
	cancel()
	rt.wg.Wait()
	if errors.Is(err, tea.ErrProgramKilled) && outer.Err() != nil {
		return nil // ended from outside (a signal): not a failure of the TUI
	}
	if err != nil {
		return coded.Wrap(CodeTerminal, err, "the terminal UI failed")
	}
	return nil
}
