package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/incusspawn/isx/internal/isx/proxy/proxytest"
)

// isxBinary is cmd/isx built once for the whole package: the tests run the
// real program, as a person or a script would.
var isxBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "isx-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	isxBinary = filepath.Join(dir, "isx")
	out, err := exec.Command(goTool(), "build", "-o", isxBinary, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building isx: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	incustest.Main(m, func() { os.RemoveAll(dir) })
}

func goTool() string {
	if path, err := exec.LookPath("go"); err == nil {
		return path
	}
	return "/usr/local/go/bin/go"
}

// cli runs the isx binary with its own home directory.
type cli struct {
	t       testing.TB
	home    string
	project string
	env     []string // extra variables, NAME=value
}

// newCLI gives the test a home whose config.yaml names the throwaway
// project of c and the test templates' directory.
func newCLI(t testing.TB, c *incus.Client) *cli {
	t.Helper()
	x := &cli{t: t, home: proxytest.Home(t), project: c.ProjectName()}
	err := config.Save(x.home, &config.Config{Project: x.project, TemplatePaths: []string{buildtest.Dir(t)}})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

func (x *cli) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, isxBinary, args...)
	cmd.Env = append(x.baseEnv(), x.env...)
	return cmd
}

// baseEnv is the test process's environment with HOME replaced and no
// ISX_PROJECT. INCUS_SOCKET stays, so isx talks to the daemon incustest
// does; x.env comes later and wins.
func (x *cli) baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name != "HOME" && name != envProject {
			env = append(env, kv)
		}
	}
	return append(env, "HOME="+x.home)
}

func (x *cli) run(args ...string) result {
	x.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := x.command(ctx, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		x.t.Fatalf("running isx %v: %v", args, err)
	}
	return r
}

// ok runs isx and fails the test unless it succeeds.
func (x *cli) ok(args ...string) result {
	x.t.Helper()
	r := x.run(args...)
	if r.code != 0 {
		x.t.Fatalf("isx %s: %s", strings.Join(args, " "), r)
	}
	return r
}

var columnGap = regexp.MustCompile(`\s{2,}`)

// table finds the table whose header starts with first and returns its
// header and rows, split into cells.
func table(output, first string) (header []string, rows [][]string) {
	in := false
	for _, line := range strings.Split(output, "\n") {
		switch {
		case !in && strings.HasPrefix(line, first+" "):
			in = true
			header = columnGap.Split(strings.TrimSpace(line), -1)
		case in && strings.TrimSpace(line) == "":
			return header, rows
		case in:
			rows = append(rows, columnGap.Split(strings.TrimSpace(line), -1))
		}
	}
	return header, rows
}

func row(rows [][]string, name string) []string {
	for _, r := range rows {
		if len(r) > 0 && r[0] == name {
			return r
		}
	}
	return nil
}

// replaceAll replaces each key of what differs between runs (a project
// name, a user) with its placeholder.
func replaceAll(s string, placeholders map[string]string) string {
	for from, to := range placeholders {
		s = strings.ReplaceAll(s, from, to)
	}
	return s
}
