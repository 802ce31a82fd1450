package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/incustest"
)

// A running instance is destroyed only with --force or once the person
// confirms on a terminal, as `incus delete` does; a stopped one needs
// neither.
func TestDestroyRunningNeedsForce(t *testing.T) {
	c := incustest.Project(t)
	x := newCLI(t, c)
	buildtest.Build(t, c, buildtest.Templates(t), buildtest.BusyBox)
	for _, name := range []string{"w-piped", "w-asked", "w-forced", "w-stopped"} {
		x.ok("branch", name, "--from", buildtest.BusyBox)
	}
	stop(t, c, "w-stopped")

	// Not on a terminal: refused, saying how.
	r := x.run("destroy", "w-piped")
	if r.code != exitFailure || !strings.Contains(r.stderr, "isx: w-piped is running; `isx destroy --force w-piped` stops and destroys it") {
		t.Errorf("destroy of a running instance: %s", r)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tm := startTerminal(t, x.command(ctx, "destroy", "w-asked"))
	tm.expect("w-asked is running. Stop and destroy it? [y/N]: ")
	tm.send("")
	tm.expect("w-asked is running, and was left as it is")
	if err := tm.cmd.Wait(); err == nil {
		t.Error("declining exited 0")
	}
	tm = startTerminal(t, x.command(ctx, "destroy", "w-asked"))
	tm.expect("Stop and destroy it? [y/N]: ")
	tm.send("y")
	tm.expect("Destroyed w-asked")
	tm.wait()

	if r := x.ok("destroy", "--force", "w-forced"); r.stdout != "Destroyed w-forced\n" {
		t.Errorf("--force: %s", r)
	}
	if r := x.ok("destroy", "w-stopped"); r.stdout != "Destroyed w-stopped\n" {
		t.Errorf("a stopped instance: %s", r)
	}
	if got := instanceNames(t, c); !slices.Equal(got, []string{buildtest.BusyBox, "w-piped"}) {
		t.Errorf("left: %v", got)
	}
}
