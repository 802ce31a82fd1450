package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/build"
)

// buildProgress is how isx build shows its progress: on a terminal, each
// step's line counts the time it has taken until it ends; elsewhere (a
// pipe, a log) plain lines, one when a step starts and one when it ends.
type buildProgress interface {
	build.Progress
	// Close ends whatever the display still draws.
	Close()
}

func (a *app) buildProgress(verbose bool) buildProgress {
	if f, ok := a.stdout.(*os.File); ok && isTerminal(f) {
		return newTerminalProgress(f, a.clock, verbose, terminalWidth(f))
	}
	return plainProgress{build.Lines(a.stdout)}
}

type plainProgress struct{ build.Progress }

func (plainProgress) Close() {}

// terminalProgress draws the running step as a status line that it
// rewrites every second with the time taken, and replaces with the step's
// outcome when it ends. Under -v the step's line is printed when it
// starts, its output streams above the status line, and the status line
// says the step is running.
type terminalProgress struct {
	w       io.Writer
	clock   clock.Clock
	verbose bool
	width   int

	mu        sync.Mutex
	step      *build.Step
	began     time.Time
	drawn     bool   // a status line is on the screen
	partial   []byte // step output not yet ending a line
	stopTicks chan struct{}
	ticking   sync.WaitGroup
}

func newTerminalProgress(w io.Writer, clk clock.Clock, verbose bool, width int) *terminalProgress {
	return &terminalProgress{w: w, clock: clk, verbose: verbose, width: width}
}

// clearLine returns to the start of the line and erases it.
const clearLine = "\r\x1b[K"

func (p *terminalProgress) Line(text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	fmt.Fprintln(p.w, text)
	p.draw()
}

func (p *terminalProgress) StepStarted(s build.Step) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	if p.verbose {
		fmt.Fprintf(p.w, "    %s %s\n", s.Tag, s.Label)
	}
	p.step, p.began, p.partial = &s, p.clock.Now(), nil
	p.draw()
	p.stopTicks = make(chan struct{})
	ticker := p.clock.NewTicker(time.Second)
	p.ticking.Go(func() {
		defer ticker.Stop()
		for {
			select {
			case <-p.stopTicks:
				return
			case <-ticker.C():
				p.mu.Lock()
				p.clear()
				p.draw()
				p.mu.Unlock()
			}
		}
	})
}

func (p *terminalProgress) StepOutput(_ build.Step, output []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	// Only whole lines go above the status line: a partial one would be
	// erased with it.
	p.partial = append(p.partial, output...)
	cut := strings.LastIndexByte(string(p.partial), '\n')
	if cut < 0 {
		return
	}
	p.clear()
	build.WriteIndented(p.w, p.partial[:cut+1], build.OutputIndent, true)
	p.partial = append([]byte(nil), p.partial[cut+1:]...)
	p.draw()
}

func (p *terminalProgress) StepEnded(s build.Step, end build.StepEnd) {
	p.stopTicking()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	if len(p.partial) > 0 {
		build.WriteIndented(p.w, append(p.partial, '\n'), build.OutputIndent, true)
	}
	p.step, p.partial = nil, nil
	switch {
	case p.verbose:
		fmt.Fprintf(p.w, "    %s %s\n", s.Tag, end.Outcome())
	case end.Failed():
		fmt.Fprintf(p.w, "    %s %s: %s\n", s.Tag, s.Label, end.Outcome())
	default:
		fmt.Fprintf(p.w, "    %s %s (%s)\n", s.Tag, s.Label, build.Round(end.Took))
	}
}

func (p *terminalProgress) Close() {
	p.stopTicking()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	p.step = nil
}

func (p *terminalProgress) stopTicking() {
	p.mu.Lock()
	stop := p.stopTicks
	p.stopTicks = nil
	p.mu.Unlock()
	if stop != nil {
		close(stop)
		p.ticking.Wait()
	}
}

// draw writes the status line of the running step, if any, cut to the
// terminal's width so that clear can erase it.
func (p *terminalProgress) draw() {
	if p.step == nil {
		return
	}
	what := p.step.Label
	if p.verbose {
		what = "running"
	}
	elapsed := " · " + elapsedText(p.clock.Since(p.began))
	line := "    " + p.step.Tag + " " + what
	if room := p.width - len([]rune(elapsed)) - 1; len([]rune(line)) > room && room > 8 {
		line = string([]rune(line)[:room-1]) + "…"
	}
	fmt.Fprint(p.w, line+elapsed)
	p.drawn = true
}

func (p *terminalProgress) clear() {
	if p.drawn {
		fmt.Fprint(p.w, clearLine)
		p.drawn = false
	}
}

// elapsedText is whole seconds, as a running clock shows them: 7s, 1m05s.
func elapsedText(d time.Duration) string {
	seconds := int(d / time.Second)
	if seconds < 60 {
		return fmt.Sprintf("%ds", seconds)
	}
	return fmt.Sprintf("%dm%02ds", seconds/60, seconds%60)
}

// terminalWidth is the terminal's columns, 80 when it does not say.
func terminalWidth(f *os.File) int {
	size, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil || size.Col == 0 {
		return 80
	}
	return int(size.Col)
}
