package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
)

// binary is the real actiond, built once for the package's tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "actiond-cli-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Readable by everyone: one test runs it as another user.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary, err = at.Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// result is one run of the binary.
type result struct {
	stdout, stderr string
	code           int
}

// environment is what the binary sees: a fixed home (so help texts do not
// depend on the machine) and none of actiond's own variables.
func environment(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "HOME", "ACTIOND_DATA", "ACTIOND_POSTGRES", "USER":
			continue
		}
		env = append(env, kv)
	}
	return append(append(env, "HOME=/home/someone", "USER=someone"), extra...)
}

// actiond runs the binary to completion.
func actiond(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = environment()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("actiond %v: %v", args, err)
	}
	return r
}

// mustActiond runs the binary and fails the test unless it succeeds.
func mustActiond(t *testing.T, args ...string) string {
	t.Helper()
	r := actiond(t, args...)
	if r.code != 0 {
		t.Fatalf("actiond %v: exit %d\n%s", args, r.code, r.stderr)
	}
	return r.stdout
}

// serve starts `actiond serve` on a fresh database of the dialect.
func serve(t *testing.T, d store.Dialect, extra ...string) *at.Process {
	t.Helper()
	return at.StartProcess(t, binary, withSchema(t, storetest.Options(t, d)), "", extra...)
}

var (
	uuidPattern  = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timePattern  = regexp.MustCompile(`"\d{4}-\d\d-\d\dT[0-9:.]+Z"`)
	msPattern    = regexp.MustCompile(`"durationMs": \d+`)
	portPattern  = regexp.MustCompile(`127\.0\.0\.1:\d+`)
	clockPattern = regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d`)
)

// normalise replaces what differs between runs (IDs, times, ports,
// durations) with stable placeholders, numbering IDs in order of
// appearance so that references between records stay visible.
func normalise(s string, extra map[string]string) string {
	for from, to := range extra {
		s = strings.ReplaceAll(s, from, to)
	}
	ids := map[string]string{}
	s = uuidPattern.ReplaceAllStringFunc(s, func(id string) string {
		if _, ok := ids[id]; !ok {
			ids[id] = fmt.Sprintf("<id-%d>", len(ids)+1)
		}
		return ids[id]
	})
	s = timePattern.ReplaceAllString(s, `"<time>"`)
	s = msPattern.ReplaceAllString(s, `"durationMs": <ms>`)
	s = clockPattern.ReplaceAllString(s, "<time>")
	return portPattern.ReplaceAllString(s, "127.0.0.1:<port>")
}

// withSchema makes the Postgres schema of opts exist, as a fresh database
// that serve fills: a DSN naming a search_path needs its schema.
func withSchema(t *testing.T, opts store.Options) store.Options {
	t.Helper()
	if opts.PostgresDSN == "" {
		return opts
	}
	conn, err := pgx.Connect(context.Background(), opts.PostgresDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{opts.PostgresSchema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return opts
}
