package build

import (
	"bytes"
	"fmt"
	"io"
	"time"
)

// Progress is told what a build does as it happens, so that a person sees
// each step as it starts. The Builder never calls it concurrently:
// StepOutput comes while the Builder waits for that step.
type Progress interface {
	// Line is a line about the build that is not a step: a template begun
	// or built, what its build instance is made from, a file written. It
	// is indented as it is to be shown and has no newline.
	Line(text string)
	// StepStarted says a step begins.
	StepStarted(s Step)
	// StepOutput is output the step printed, as it prints it, stdout and
	// stderr as they come (only under Builder.Verbose); a chunk need not
	// end a line.
	StepOutput(s Step, output []byte)
	// StepEnded says how the step ended.
	StepEnded(s Step, end StepEnd)
}

// Step is one shell script of a build, as a person reads it.
type Step struct {
	Template string
	// Tag is "[isx]" for isx's own steps (the agent user, packages) and
	// "[n/m]" for the template's run steps.
	Tag   string
	Label string
}

// StepEnd is how a step ended.
type StepEnd struct {
	Took     time.Duration
	ExitCode int
	TimedOut bool
	// Err is set when the step could not be run at all, or isx's own
	// work shown as a step failed.
	Err error
}

// Failed reports whether the step did not succeed.
func (e StepEnd) Failed() bool { return e.Err != nil || e.TimedOut || e.ExitCode != 0 }

// Outcome says how the step ended, for a person: "done in 1.2s", "failed
// with exit code 2 after 1.2s", "timed out after 30m0s".
func (e StepEnd) Outcome() string {
	took := Round(e.Took)
	switch {
	case e.Err != nil:
		return fmt.Sprintf("failed after %s", took)
	case e.TimedOut:
		return fmt.Sprintf("timed out after %s", took)
	case e.ExitCode != 0:
		return fmt.Sprintf("failed with exit code %d after %s", e.ExitCode, took)
	}
	return fmt.Sprintf("done in %s", took)
}

// Lines is Progress as lines of text on w, for logs and pipes: each step's
// line when it starts and another when it ends, its output between them,
// indented.
func Lines(w io.Writer) Progress { return &lines{w: w, lineStart: true} }

type lines struct {
	w         io.Writer
	lineStart bool // the last output written ended its line
}

func (l *lines) Line(text string) { fmt.Fprintln(l.w, text) }

func (l *lines) StepStarted(s Step) {
	l.lineStart = true
	fmt.Fprintf(l.w, "    %s %s\n", s.Tag, s.Label)
}

func (l *lines) StepOutput(_ Step, output []byte) {
	l.lineStart = WriteIndented(l.w, output, OutputIndent, l.lineStart)
}

func (l *lines) StepEnded(s Step, end StepEnd) {
	if !l.lineStart {
		fmt.Fprintln(l.w)
		l.lineStart = true
	}
	fmt.Fprintf(l.w, "    %s %s\n", s.Tag, end.Outcome())
}

// OutputIndent starts every line of a step's output Lines shows.
const OutputIndent = "      | "

// WriteIndented writes output with indent at the start of every line, and
// reports whether it ended a line; atStart says whether the output before
// it did.
func WriteIndented(w io.Writer, output []byte, indent string, atStart bool) bool {
	var b bytes.Buffer
	for len(output) > 0 {
		if atStart {
			b.WriteString(indent)
		}
		line, rest, found := bytes.Cut(output, []byte("\n"))
		b.Write(line)
		if found {
			b.WriteByte('\n')
		}
		atStart, output = found, rest
	}
	w.Write(b.Bytes()) //nolint:errcheck // progress for a person; a failed write shows itself
	return atStart
}

// discard is the Progress of a Builder with neither Progress nor Out.
type discard struct{}

func (discard) Line(string)             {}
func (discard) StepStarted(Step)        {}
func (discard) StepOutput(Step, []byte) {}
func (discard) StepEnded(Step, StepEnd) {}
