package task

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// hostileStrings are words an agent might send to break out of quoting.
var hostileStrings = []string{
	"",
	"plain",
	"it's",
	`"double" quoted`,
	"'",
	"''",
	`'\''`,
	`\`,
	`\'`,
	"$(touch PWNED)",
	"`touch PWNED`",
	"${HOME}",
	"$HOME",
	"a;touch PWNED",
	"a && touch PWNED",
	"a | touch PWNED",
	"new\nline; touch PWNED",
	"\n",
	"trailing newline\n",
	"tab\there",
	"*",
	"~",
	"-n",
	"--",
	"%s %d %%",
	"!",
	"#comment",
	"é ünïcödé ✓",
	"\x01\x02\x1b[31mescape",
	"'$(touch PWNED)'",
	"\"$(touch PWNED)\"",
	"x'; touch PWNED; echo '",
}

// shells are the sh implementations the scripts meet in instances.
func shells(t *testing.T) [][]string {
	t.Helper()
	var found [][]string
	for _, sh := range [][]string{{"dash"}, {"busybox", "sh"}, {"bash", "--posix"}} {
		if _, err := exec.LookPath(sh[0]); err != nil {
			t.Fatalf("%s is needed for this test: %v", sh[0], err)
		}
		found = append(found, sh)
	}
	return found
}

// runShell runs text in sh in dir and returns its stdout.
func runShell(t *testing.T, sh []string, dir, text string, env ...string) []byte {
	t.Helper()
	cmd := exec.Command(sh[0], append(sh[1:], "-c", text)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %v\n%s", sh, err, stderr.String())
	}
	return out
}

func noPwned(t *testing.T, dir string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, "PWNED")); err == nil {
		t.Fatalf("a quoted word ran a command")
	}
}

func TestShellQuoteRoundTrips(t *testing.T) {
	for _, sh := range shells(t) {
		dir := t.TempDir()
		for _, s := range hostileStrings {
			out := runShell(t, sh, dir, "printf '%s' "+shellQuote(s))
			if string(out) != s {
				t.Errorf("%v: %q came back as %q", sh, s, out)
			}
		}
		noPwned(t, dir)
	}
}

func FuzzShellQuote(f *testing.F) {
	for _, s := range hostileStrings {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, s string) {
		if strings.ContainsRune(s, 0) {
			t.Skip("NUL cannot be an argument")
		}
		out := runShell(t, []string{"dash"}, dir, "printf '%s' "+shellQuote(s))
		if string(out) != s {
			t.Errorf("%q came back as %q", s, out)
		}
		noPwned(t, dir)
	})
}

// The command and env files a run sources give back argv, values and the
// working directory exactly, in every shell.
func TestCommandAndEnvFilesAreExact(t *testing.T) {
	for _, sh := range shells(t) {
		dir := t.TempDir()
		cwd := filepath.Join(dir, "we ird'$(touch PWNED)\ndir")
		if err := os.Mkdir(cwd, 0o755); err != nil {
			t.Fatal(err)
		}
		env := map[string]string{}
		for i, s := range hostileStrings {
			env["V"+string(rune('A'+i%26))+strings.Repeat("_", i/26)] = s
		}
		files := map[string]string{
			"command": commandFile(cwd, append([]string{"printf", "%s\\0"}, hostileStrings...)),
			"pwd":     commandFile(cwd, []string{"pwd", "-P"}),
			"env":     envFile(env),
		}
		for name, text := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		want := strings.Join(hostileStrings, "\x00") + "\x00"
		if out := runShell(t, sh, dir, `(. ./command)`); string(out) != want {
			t.Errorf("%v: argv came back as %q, want %q", sh, out, want)
		}
		if out := runShell(t, sh, dir, `(. ./pwd)`); string(out) != cwd+"\n" {
			t.Errorf("%v: cwd came back as %q, want %q", sh, out, cwd)
		}
		for name, value := range env {
			if got := runShell(t, sh, dir, `. ./env; printf '%s' "$`+name+`"`); string(got) != value {
				t.Errorf("%v: %s=%q came back as %q", sh, name, value, got)
			}
		}
		noPwned(t, dir)
		noPwned(t, cwd)
	}
}
