package holding_test

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/holding"
	"github.com/incusspawn/isx/internal/isx/incustest"
)

// A stdio session is alive exactly while its process runs: not once it
// exited (even as an unreaped zombie), not when its pid is reused.
func TestSessionLiveness(t *testing.T) {
	self, err := holding.StdioSession()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(self, "stdio:"+strconv.Itoa(os.Getpid())+":") || !holding.SessionAlive(self) {
		t.Fatalf("own session %q not alive", self)
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	id, err := holding.SessionOf(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if !holding.SessionAlive(id) {
		t.Fatal("a running process's session is dead")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Killed but not reaped: a zombie is gone as far as sessions go.
	incustest.WaitFor(t, "the zombie", 5*time.Second, func() bool { return !holding.SessionAlive(id) })
	cmd.Wait() //nolint:errcheck // killed on purpose
	if holding.SessionAlive(id) {
		t.Fatal("a reaped process's session is alive")
	}
	pid, _, _ := strings.Cut(strings.TrimPrefix(self, "stdio:"), ":")
	if holding.SessionAlive("stdio:" + pid + ":1") {
		t.Fatal("a reused pid (other start time) counts as the same session")
	}
	for _, bad := range []string{"stdio:", "stdio:x:1", "stdio:-1:1", ""} {
		if holding.SessionAlive(bad) {
			t.Errorf("%q is alive", bad)
		}
	}
	if !holding.SessionAlive("instance:coord") {
		t.Error("a session of another kind must count as alive (nothing proves it ended)")
	}
}
