package incus_test

import (
	"context"
	"os/exec"
	"testing"

	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
)

// BenchmarkExecTrue compares our Exec of `true` (one kept-alive connection,
// no websockets, output read from the exec logs) with what `incus exec` costs
// (a new process, websockets per stream), in the same running busybox
// instance. isx mcp's foreground exec must be at least as fast as the CLI.
func BenchmarkExecTrue(b *testing.B) {
	c := incustest.Project(b)
	name := incustest.Launch(b, c, incustest.BusyBox)
	ctx := context.Background()

	b.Run("incus-rest", func(b *testing.B) {
		for b.Loop() {
			res, err := c.Exec(ctx, name, incus.ExecRequest{Command: []string{"true"}})
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("exec true: %+v, %v", res, err)
			}
		}
	})
	b.Run("incus-rest-stdin", func(b *testing.B) {
		for b.Loop() {
			res, err := c.Exec(ctx, name, incus.ExecRequest{Command: []string{"true"}, Stdin: []byte("input\n")})
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("exec true: %+v, %v", res, err)
			}
		}
	})
	b.Run("incus-cli", func(b *testing.B) {
		for b.Loop() {
			cmd := exec.Command("incus", "exec", "--project", c.ProjectName(), name, "--", "true")
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("incus exec: %v\n%s", err, out)
			}
		}
	})
}
