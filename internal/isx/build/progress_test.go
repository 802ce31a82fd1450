package build_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/build"
	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/incustest"
)

// recorder keeps what Progress was told, one event a line.
type recorder struct{ events []string }

func (r *recorder) Line(text string)                  { r.events = append(r.events, "line "+strings.TrimSpace(text)) }
func (r *recorder) StepStarted(s build.Step)          { r.events = append(r.events, "start "+s.Tag+" "+s.Label) }
func (r *recorder) StepOutput(s build.Step, p []byte) { r.add("output "+s.Tag, string(p)) }
func (r *recorder) StepEnded(s build.Step, end build.StepEnd) {
	r.events = append(r.events, fmt.Sprintf("end %s exit=%d failed=%v", s.Tag, end.ExitCode, end.Failed()))
}

// add joins output chunks of one step into one event, since the exec's
// follower may cut them anywhere.
func (r *recorder) add(kind, text string) {
	if n := len(r.events); n > 0 && strings.HasPrefix(r.events[n-1], kind+" ") {
		r.events[n-1] += text
		return
	}
	r.events = append(r.events, kind+" "+text)
}

func (r *recorder) index(prefix string) int { return r.indexAfter(-1, prefix) }

// indexAfter is the first event after the one at after that starts with
// prefix, or -1.
func (r *recorder) indexAfter(after int, prefix string) int {
	for i := after + 1; i < len(r.events); i++ {
		if strings.HasPrefix(r.events[i], prefix) {
			return i
		}
	}
	return -1
}

// Progress hears of every step as it starts and as it ends, in order, and
// under Verbose gets each step's output between the two; a failing step's
// error says its output was shown.
func TestProgressTellsEachStep(t *testing.T) {
	t.Parallel()
	c := incustest.Project(t)
	incustest.EnsureImages(t, incustest.BusyBox)
	dir := buildtest.Write(t, map[string]string{"p.yaml": "name: tpl-progress\nimage: isx/busybox\nrun:\n" +
		"  - name: greet\n    run: echo hello; echo to-stderr >&2\n" +
		"  - name: fail\n    run: echo going down; exit 4\n"})
	set := buildtest.Templates(t, dir)
	progress := &recorder{}
	b := &build.Builder{Client: c, Set: set, Owner: "tester", Progress: progress, Verbose: true}
	_, err := b.Build(testContext(t), build.Request{Templates: []string{"tpl-progress"}})
	var stepErr *build.StepError
	if !errors.As(err, &stepErr) || !stepErr.Shown || coded.CodeOf(err) != build.CodeStepFailed {
		t.Fatalf("error %v, want a StepError whose output was shown", err)
	}
	events := strings.Join(progress.events, "\n")
	order := []string{"line ==> [1/1] tpl-progress", "start [isx] make tpl-progress--build-", "end [isx] exit=0 failed=false", "start [isx] create the agent user", "end [isx] exit=0 failed=false",
		"start [1/2] greet", "output [1/2]", "end [1/2] exit=0 failed=false", "start [2/2] fail", "output [2/2] going down", "end [2/2] exit=4 failed=true",
		"line removed the build instance"}
	last := -1
	for _, want := range order {
		i := progress.indexAfter(last, want)
		if i <= last {
			t.Fatalf("%q is missing or out of order in:\n%s", want, events)
		}
		last = i
	}
	if greet := progress.events[progress.index("output [1/2]")]; !strings.Contains(greet, "hello\n") || !strings.Contains(greet, "to-stderr\n") {
		t.Errorf("the greet step's output: %q", greet)
	}
}

// Lines shows each step when it starts and when it ends, its output
// indented between the two, a partial last line ended.
func TestLinesProgress(t *testing.T) {
	var out bytes.Buffer
	p := build.Lines(&out)
	step := build.Step{Template: "tpl-x", Tag: "[1/2]", Label: "compile"}
	p.Line("==> [1/1] tpl-x")
	p.StepStarted(step)
	p.StepOutput(step, []byte("one\ntw"))
	p.StepOutput(step, []byte("o\nthree"))
	p.StepEnded(step, build.StepEnd{Took: 1500e6, ExitCode: 2})
	want := "==> [1/1] tpl-x\n    [1/2] compile\n      | one\n      | two\n      | three\n    [1/2] failed with exit code 2 after 1.5s\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}

// A root image that the project lacks but the default project has is
// named, with the copy that fixes it, when the project keeps images of its
// own.
func TestMissingImageInProjectWithOwnImages(t *testing.T) {
	t.Parallel()
	c := incustest.Project(t)
	incustest.EnsureImages(t, incustest.BusyBox)
	if out, err := exec.Command("incus", "project", "set", c.ProjectName(), "features.images=true").CombinedOutput(); err != nil {
		t.Fatalf("incus project set: %v\n%s", err, out)
	}
	set := buildtest.Templates(t)
	b := &build.Builder{Client: c, Set: set, Owner: "tester"}
	_, err := b.Build(context.Background(), build.Request{Templates: []string{buildtest.BusyBox}})
	hint := coded.HintOf(err)
	want := "incus image copy isx/busybox local: --alias isx/busybox --target-project " + c.ProjectName() + " --mode relay"
	if coded.CodeOf(err) != build.CodeImageNotFound || !strings.Contains(err.Error(), "in project "+c.ProjectName()) || !strings.Contains(hint, want) {
		t.Fatalf("error %v, hint %q", err, hint)
	}
	command := strings.SplitN(hint, "`", 3)[1]
	if out, err := exec.Command("sh", "-c", command).CombinedOutput(); err != nil {
		t.Fatalf("the hint's command %s: %v\n%s", command, err, out)
	}
	alias, err := c.GetImageAlias(context.Background(), "isx/busybox")
	if err != nil {
		t.Fatalf("after the hint's command: %v", err)
	}
	t.Cleanup(func() {
		if err := c.DeleteImage(context.Background(), alias.Target); err != nil {
			t.Error(err)
		}
	})
	if _, err := b.Plan(context.Background(), build.Request{Templates: []string{buildtest.BusyBox}}); err != nil {
		t.Errorf("after the hint's command, the plan still fails: %v", err)
	}
}
