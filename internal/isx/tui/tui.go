package tui

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/term"
	"github.com/muesli/termenv"

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
	renderer := lipgloss.NewRenderer(opts.Output, termenv.WithTTY(isTerminal(opts.Output)))
	output := lockOutput(opts.Output)
	opts.Output = output
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rt := newRuntime(ctx)
	m := newModel(opts, rt, renderer)
	program := tea.NewProgram(m, tea.WithAltScreen(), tea.WithContext(ctx),
		tea.WithInput(opts.Input), tea.WithOutput(output))
	rt.send = program.Send
	rt.watchEvents(opts.Incus, opts.Clock)
	rt.ticks(opts.Clock)
	if opts.Activities != nil {
		rt.watchActivity(opts.Activities, opts.Clock)
	}
	_, err := program.Run()
	cancel()
	rt.wg.Wait()
	if errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return nil // ended from outside (a signal): not a failure of the TUI
	}
	if err != nil {
		return coded.Wrap(CodeTerminal, err, "the terminal UI failed")
	}
	return nil
}

// isTerminal says whether w is a terminal. The colours follow from it,
// TERM and NO_COLOR alone: a CI variable in the environment (which
// termenv takes to mean no terminal) does not turn them off on a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(f.Fd())
}

// lockOutput serialises what is written to the terminal, so that a
// clipboard sequence never lands inside a frame Bubble Tea is writing. A
// terminal stays a file, for Bubble Tea to read its size from.
func lockOutput(w io.Writer) io.Writer {
	mu := &sync.Mutex{}
	if f, ok := w.(*os.File); ok {
		return lockedFile{File: f, mu: mu}
	}
	return &lockedWriter{w: w, mu: mu}
}

type lockedFile struct {
	*os.File
	mu *sync.Mutex
}

func (f lockedFile) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.File.Write(p)
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
