package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/incusspawn/isx/internal/sourcetree"
)

// The README's quick start runs scripts/setup, whose isx lines this test
// runs as they are written, in a fresh home (ISX_PROJECT keeps them to a
// throwaway project); then the next step `isx init` prints, which makes an
// instance whose host name is its name.
func TestQuickStart(t *testing.T) {
	c := incustest.Project(t)
	incustest.EnsureImages(t, incustest.Debian)
	root, err := sourcetree.Root()
	if err != nil {
		t.Fatal(err)
	}
	setup, err := os.ReadFile(filepath.Join(root, "scripts", "setup"))
	if err != nil {
		t.Fatal(err)
	}
	x := &cli{t: t, home: t.TempDir(), env: []string{envProject + "=" + c.ProjectName()}}
	var lines []string
	for _, line := range strings.Split(string(setup), "\n") {
		if strings.HasPrefix(line, "isx ") {
			lines = append(lines, line)
		}
	}
	if strings.Join(lines, "; ") != "isx init --non-interactive; isx build tpl-dev; isx list" {
		t.Fatalf("scripts/setup's isx lines changed, and this test with them: %q", lines)
	}
	var printed string
	for _, line := range lines {
		printed += x.ok(strings.Fields(line)[1:]...).stdout
	}
	_, templates := table(printed, "TEMPLATE")
	if got := row(templates, "tpl-dev"); len(got) != 3 || got[2] != "built" {
		t.Fatalf("tpl-dev after the quick start: %v\n%s", got, printed)
	}

	next := regexp.MustCompile("Next: `isx build tpl-dev`, then `isx (branch work --from tpl-dev)`").FindStringSubmatch(printed)
	if next == nil {
		t.Fatalf("isx init printed no next step:\n%s", printed)
	}
	x.ok(strings.Fields(next[1])...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := c.Exec(ctx, "work", incus.ExecRequest{Command: []string{"sh", "-c", "hostname; cat /etc/hostname"}})
	if err != nil || string(res.Stdout) != "work\nwork\n" {
		t.Errorf("the host name of work: %q, %v", res.Stdout, err)
	}
	x.ok("destroy", "--force", "work")
}
