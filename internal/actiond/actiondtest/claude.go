package actiondtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// ClaudeVersion is the Claude Code the tests sign in with, the same one the
// isx tests register with, so that one install serves both.
const ClaudeVersion = "2.1.328"

// Claude returns the path of the real Claude Code's `claude`: from PATH,
// or installed once from npm (@anthropic-ai/claude-code) into the temporary
// directory, shared by every test run on the machine.
func Claude(t testing.TB) string {
	t.Helper()
	if path, err := exec.LookPath("claude"); err == nil {
		return path
	}
	prefix := filepath.Join(os.TempDir(), "isx-claude-code-"+ClaudeVersion)
	binary := filepath.Join(prefix, "node_modules", ".bin", "claude")
	if _, err := os.Stat(binary); err == nil {
		return binary
	}
	lock, err := os.OpenFile(prefix+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(binary); err == nil {
		return binary
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "npm", "install", "--prefix", prefix, "--no-audit", "--no-fund", "@anthropic-ai/claude-code@"+ClaudeVersion).CombinedOutput()
	if err != nil {
		t.Fatalf("installing Claude Code from npm: %v\n%s", err, out)
	}
	return binary
}
