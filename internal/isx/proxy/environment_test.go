package proxy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/isx/instance"
)

// env runs the shell form with the secret file at file and returns the
// environment it exports.
func shellEnv(t *testing.T, file string) map[string]string {
	t.Helper()
	cmd := exec.Command("sh", "-c", strings.ReplaceAll(ShellEnvironment(), instance.SecretFile, file)+"env")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if name, value, ok := strings.Cut(line, "="); ok {
			got[name] = value
		}
	}
	return got
}

// The shell form of the agent environment, run by a real shell, gives
// exactly AgentEnvironment for the secret it reads from the file; it
// exports nothing without the file.
func TestShellEnvironmentMatchesAgentEnvironment(t *testing.T) {
	const secret = "0123456789abcdef"
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, []byte(secret+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := shellEnv(t, file)
	for name, want := range AgentEnvironment(secret) {
		if want == instance.SecretFile {
			want = file
		}
		if got[name] != want {
			t.Errorf("%s = %q, want %q", name, got[name], want)
		}
	}
	if got["ANTHROPIC_API_KEY"] != secret || !strings.Contains(got["HTTPS_PROXY"], ":"+secret+"@127.0.0.1:3128") {
		t.Errorf("the secret is not the key and proxy password: %v", got)
	}
	if got := shellEnv(t, filepath.Join(t.TempDir(), "missing")); got["HTTPS_PROXY"] != "" || got["ANTHROPIC_API_KEY"] != "" {
		t.Errorf("without the secret file the environment is set: %v", got)
	}
}
