package main

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/build"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/incusspawn/isx/internal/testkit"
)

// waitingTemplate has a step that prints a line, then waits for a file
// that only the test makes, once it has seen what it wants to see while
// the step runs, then prints another.
const waitingTemplate = "name: tpl-wait\nimage: isx/busybox\nrun:\n" +
	"  - name: wait for the test\n" +
	"    run: echo first; while [ ! -e /var/tmp/go ]; do sleep 0.1; done; echo second\n"

var buildInstancePattern = regexp.MustCompile(`make (tpl-wait--build-[a-z0-9]{5}) from`)

// release makes the file the waiting step waits for, in the build
// instance the output names.
func release(t *testing.T, c *incus.Client, output string) {
	t.Helper()
	found := buildInstancePattern.FindStringSubmatch(output)
	if found == nil {
		t.Fatalf("no build instance named in:\n%s", output)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.PushFile(ctx, found[1], "/var/tmp/go", strings.NewReader(""), incus.FileOptions{Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
}

// Through a pipe, isx build prints each step's line as the step starts
// and another when it ends; -v streams the step's output between them
// while it runs.
func TestBuildShowsEachStepAsItStarts(t *testing.T) {
	c := incustest.Project(t)
	incustest.EnsureImages(t, incustest.BusyBox)
	x := newCLI(t, c)
	x.userTemplate(t, "wait.yaml", waitingTemplate)
	for _, verbose := range []bool{false, true} {
		args := []string{"build", "tpl-wait"}
		want := "    [1/1] wait for the test\n"
		if verbose {
			args = append(args, "-v")
			want += "      | first\n"
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		cmd := x.command(ctx, args...)
		var out testkit.SyncBuffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The step cannot end before release: what is shown now was shown
		// while it ran.
		waitFor(t, &out, want)
		if strings.Contains(out.String(), "    [1/1] done in") {
			t.Errorf("the step ended before it was released:\n%s", out.String())
		}
		release(t, c, out.String())
		if err := cmd.Wait(); err != nil {
			t.Fatalf("isx %v: %v\n%s", args, err, out.String())
		}
		cancel()
		ended := want + "    [1/1] done in "
		if verbose {
			ended = want + "      | second\n    [1/1] done in "
		}
		if !strings.Contains(out.String(), ended) {
			t.Errorf("isx %v:\n%s\nwant it to hold %q", args, out.String(), ended)
		}
		// isx's own work before and after the steps is shown as steps too.
		made := buildInstancePattern.FindString(out.String())
		for _, phase := range []string{"    [isx] " + made + " image isx/busybox\n    [isx] done in ", "    [isx] stamp it as tpl-wait, stop it and put it in place\n    [isx] done in "} {
			if made == "" || !strings.Contains(out.String(), phase) {
				t.Errorf("isx %v does not show %q:\n%s", args, phase, out.String())
			}
		}
	}
}

// On a terminal the running step's line counts the seconds it has taken,
// and is replaced by its outcome when it ends; under -v its output is
// shown above a status line as it is printed.
func TestBuildShowsElapsedTimeOnATerminal(t *testing.T) {
	c := incustest.Project(t)
	incustest.EnsureImages(t, incustest.BusyBox)
	x := newCLI(t, c)
	x.userTemplate(t, "wait.yaml", waitingTemplate)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	tm := startTerminal(t, x.command(ctx, "build", "tpl-wait"))
	// Making and booting the build instance counts its seconds as a step.
	tm.expect("    [isx] make tpl-wait--build-")
	tm.expect(" from image isx/busybox · 0s")
	tm.expect(clearLine + "    [isx] make tpl-wait--build-")
	tm.expect(" from image isx/busybox (")
	tm.expect("    [1/1] wait for the test · 0s")
	tm.expect(clearLine + "    [1/1] wait for the test · 1s")
	release(t, c, tm.out.String())
	tm.expect(clearLine + "    [1/1] wait for the test (")
	tm.expect("    [isx] stamp it as tpl-wait, stop it and put it in place · 0s")
	tm.expect(clearLine + "    [isx] stamp it as tpl-wait, stop it and put it in place (")
	tm.expect("Built 1 template(s)")
	tm.wait()

	tm = startTerminal(t, x.command(ctx, "build", "-v", "tpl-wait"))
	tm.expect("    [1/1] wait for the test\r\n")
	tm.expect("      | first\r\n    [1/1] running · ")
	tm.expect(clearLine + "    [1/1] running · 1s")
	release(t, c, tm.out.String())
	tm.expect("      | second\r\n")
	tm.expect("    [1/1] done in ")
	tm.wait()
}

// The terminal display, on a fake clock: the status line is redrawn each
// second with the time taken, cut to the terminal's width, and replaced by
// the outcome; its ticker stops with the step. (The integration tests
// above run it on a real terminal.)
func TestTerminalProgressOnAFakeClock(t *testing.T) {
	fake := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	var out testkit.SyncBuffer
	p := newTerminalProgress(&out, fake, false, 40)
	step := build.Step{Template: "tpl-x", Tag: "[1/1]", Label: "a label far too long to fit on forty columns"}
	p.StepStarted(step)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for second := 1; second <= 2; second++ {
		if err := fake.WaitForTimers(ctx, 1); err != nil {
			t.Fatal(err)
		}
		fake.Advance(time.Second)
		want := clearLine + "    [1/1] a label far too long to… · " + strconv.Itoa(second) + "s"
		if err := incustest.Poll(ctx, 5*time.Millisecond, func() bool { return strings.HasSuffix(out.String(), want) }); err != nil {
			t.Fatalf("after %ds: %q, want it to end %q", second, out.String(), want)
		}
	}
	p.StepEnded(step, build.StepEnd{Took: 2100 * time.Millisecond})
	if want := clearLine + "    [1/1] " + step.Label + " (2.1s)\n"; !strings.HasSuffix(out.String(), want) {
		t.Errorf("end: %q", out.String())
	}
	if n := fake.Timers(); n != 0 {
		t.Errorf("%d timers left after the step", n)
	}
	p.Close()
}
