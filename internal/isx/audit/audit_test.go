package audit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Credentials are scrubbed from text wherever they appear (ISX-277).
func TestScrubTextISX277(t *testing.T) {
	secrets := []string{
		"sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
		"sk-proj-abcdefghijklmnop1234",
		"ghp_abcdefghijklmnopqrstuvwxyz0123456789",
		"gho_abcdefghijklmnopqrstuvwxyz0123456789",
		"github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
		"xoxb-1234567890-abcdefghij",
		"AKIAIOSFODNN7EXAMPLE",
		"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
		"hunter2-password-value",
	}
	cases := []string{
		"curl -H 'Authorization: Bearer %s' https://api.example",
		"export ANTHROPIC_API_KEY=%s",
		"GITHUB_TOKEN=\"%s\" git push",
		"the token is %s, do not share",
		"git clone https://bot:%s@github.com/org/repo",
		"mysql --password=%s",
		"db --token %s",
		`{"client_secret": "%s"}`,
	}
	for _, secret := range secrets {
		for _, form := range cases {
			text := fmt.Sprintf(form, secret)
			if secret == "hunter2-password-value" && strings.HasPrefix(form, "the token is") {
				continue // a plain word is a secret only where a name says so
			}
			got := ScrubText(text)
			if strings.Contains(got, secret) {
				t.Errorf("ScrubText(%q) = %q: the secret is still there", text, got)
			}
			if !strings.Contains(got, Redacted) {
				t.Errorf("ScrubText(%q) = %q: no %s mark", text, got, Redacted)
			}
		}
	}
	for _, plain := range []string{"echo hello", "make test -j4", "exit code 3", "git log --author=bob", "idempotency_key: job-7"} {
		if got := ScrubText(plain); got != plain {
			t.Errorf("ScrubText(%q) = %q: nothing secret was there", plain, got)
		}
	}
}

// Values under secret-looking names are scrubbed, whatever they hold; the
// idempotency key is not a secret (ISX-277).
func TestScrubValuesISX277(t *testing.T) {
	in := map[string]any{
		"command":         "echo hi",
		"idempotency_key": "job-1",
		"env": map[string]any{
			"GITHUB_TOKEN": "plain",
			"DB_PASSWORD":  "plain",
			"API_KEY":      "plain",
			"LANG":         "C.UTF-8",
		},
		"list": []any{"x", map[string]any{"secret": "plain"}},
		"n":    3.0,
	}
	out := Scrub(in).(map[string]any)
	env := out["env"].(map[string]any)
	for _, name := range []string{"GITHUB_TOKEN", "DB_PASSWORD", "API_KEY"} {
		if env[name] != Redacted {
			t.Errorf("env %s = %v, want scrubbed", name, env[name])
		}
	}
	if env["LANG"] != "C.UTF-8" || out["idempotency_key"] != "job-1" || out["command"] != "echo hi" || out["n"] != 3.0 {
		t.Errorf("harmless values changed: %v", out)
	}
	if out["list"].([]any)[1].(map[string]any)["secret"] != Redacted {
		t.Errorf("nested secret kept: %v", out["list"])
	}
	if in["env"].(map[string]any)["GITHUB_TOKEN"] != "plain" {
		t.Error("Scrub changed its input")
	}
	if got := string(ScrubJSON([]byte("not json sk-abcdefghijklmnop"))); strings.Contains(got, "sk-abc") {
		t.Errorf("ScrubJSON of text kept the secret: %s", got)
	}
}

func readLines(t *testing.T, path string) []Entry {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []Entry
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		var e Entry
		if err := json.Unmarshal(scanner.Bytes(), &e); err != nil {
			t.Fatalf("line %q is not an entry: %v", scanner.Text(), err)
		}
		out = append(out, e)
	}
	if err := scanner.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// The log is JSON lines, 0600 in a 0700 directory, scrubbed (ISX-276,
// ISX-277).
func TestAppendISX276(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "incus-spawn")
	path := filepath.Join(dir, FileName)
	l := Open(path, Options{})
	defer l.Close()
	if err := l.Ready(); err != nil {
		t.Fatal(err)
	}
	err := l.Append(Entry{
		Time: time.Now(), Session: "stdio:1:2", Tool: "exec",
		Arguments: json.RawMessage(`{"instance":"mcp-a","command":"GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123 git push"}`),
		Outcome:   OutcomeOK, Result: json.RawMessage(`{"stdout":"token ghp_abcdefghijklmnopqrstuvwxyz0123"}`),
		DurationMS: 5,
	})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "ghp_abc") {
		t.Fatalf("the log holds the token: %s", data)
	}
	entries := readLines(t, path)
	if len(entries) != 1 || entries[0].Tool != "exec" || entries[0].Outcome != OutcomeOK {
		t.Fatalf("entries = %+v", entries)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, dir: 0o700} {
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != want {
			t.Errorf("%s has mode %v, want %v", p, info.Mode().Perm(), want)
		}
	}
}

// The log rotates by size and keeps the configured number of old logs;
// two processes' writers sharing it lose no line and split none.
func TestRotationAndConcurrentWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	const writers, perWriter = 4, 200
	var wg sync.WaitGroup
	for w := range writers {
		l := Open(path, Options{MaxBytes: 8 << 10, Keep: 50})
		t.Cleanup(func() { l.Close() })
		wg.Go(func() {
			for i := range perWriter {
				err := l.Append(Entry{Time: time.Now(), Session: fmt.Sprintf("w%d", w), Tool: "list_instances",
					Outcome: OutcomeOK, Message: strings.Repeat("x", 50), DurationMS: int64(i)})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	total := len(readLines(t, path))
	files, err := filepath.Glob(path + ".*")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, ".lock") {
			continue
		}
		info, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if info.Size() > 8<<10 {
			t.Errorf("%s is %d bytes, over the limit", f, info.Size())
		}
		total += len(readLines(t, f))
	}
	if total != writers*perWriter {
		t.Fatalf("%d lines in the logs, want %d", total, writers*perWriter)
	}

	// With Keep 2 only two rotated logs survive.
	small := filepath.Join(t.TempDir(), FileName)
	l := Open(small, Options{MaxBytes: 300, Keep: 2})
	defer l.Close()
	for i := range 40 {
		if err := l.Append(Entry{Time: time.Now(), Tool: "t", Outcome: OutcomeOK, DurationMS: int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{small, small + ".1", small + ".2"} {
		if _, err := os.Stat(name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := os.Stat(small + ".3"); err == nil {
		t.Errorf("%s.3 exists though Keep is 2", small)
	}
}

// A log that cannot be written says so before any call is made, so a caller
// can refuse work it could not record.
func TestReadyFailsWhenUnwritable(t *testing.T) {
	base := t.TempDir()
	blocker := filepath.Join(base, "state")
	if err := os.WriteFile(blocker, []byte("a file where the directory belongs"), 0o600); err != nil {
		t.Fatal(err)
	}
	l := Open(filepath.Join(blocker, "incus-spawn", FileName), Options{})
	if err := l.Ready(); err == nil {
		t.Fatal("Ready succeeded under a file")
	}
	if err := l.Append(Entry{Tool: "x"}); err == nil {
		t.Fatal("Append succeeded under a file")
	}
}

// FuzzScrubText: scrubbing never panics and is idempotent.
func FuzzScrubText(f *testing.F) {
	f.Add("Authorization: Bearer abcdefgh")
	f.Add("https://u:p@host/x sk-abcdefghijklmnop")
	f.Fuzz(func(t *testing.T, s string) {
		once := ScrubText(s)
		if twice := ScrubText(once); twice != once {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, once, twice)
		}
	})
}
