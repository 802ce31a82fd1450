package incus_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
)

func TestFilePushPull(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	c, name := execInstance(t, incustest.BusyBox)

	content := bytes.Repeat([]byte{0, 1, 2, 'x', '\n'}, 100000)
	err := c.PushFile(ctx, name, "/home/agent/.isx-mcp/tasks/t1/prompt", bytes.NewReader(content),
		incus.FileOptions{Mode: 0o640, UID: 1000, GID: 1000, MakeParents: true})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.PullFile(ctx, name, "/home/agent/.isx-mcp/tasks/t1/prompt")
	if err != nil || !bytes.Equal(got, content) {
		t.Fatalf("pulled %d bytes (%v), pushed %d", len(got), err, len(content))
	}
	body, info, err := c.OpenFile(ctx, name, "/home/agent/.isx-mcp/tasks/t1/prompt")
	if err != nil {
		t.Fatal(err)
	}
	if err := body.Close(); err != nil {
		t.Fatal(err)
	}
	if stat, err := c.StatFile(ctx, name, "/home/agent/.isx-mcp/tasks/t1/prompt"); err != nil || *stat != *info {
		t.Errorf("StatFile = %+v, %v; OpenFile said %+v", stat, err, info)
	}
	if stat, err := c.StatFile(ctx, name, "/home/agent"); err != nil || stat.Type != "directory" || stat.UID != 1000 {
		t.Errorf("StatFile of a made parent = %+v, %v", stat, err)
	}
	if _, err := c.StatFile(ctx, name, "/no/such/file"); !errors.Is(err, incus.ErrNotFound) {
		t.Errorf("StatFile of a missing file: %v, want ErrNotFound", err)
	}
	if info.Type != "file" || info.Mode != 0o640 || info.UID != 1000 || info.GID != 1000 || info.Size != int64(len(content)) {
		t.Errorf("file info = %+v", info)
	}
	res := mustExec(t, c, name, incus.ExecRequest{Command: []string{"sh", "-c", "stat -c '%a %u:%g' /home/agent/.isx-mcp/tasks/t1 /tmp; cat /home/agent/.isx-mcp/tasks/t1/prompt | wc -c"}})
	if got := strings.Fields(string(res.Stdout)); strings.Join(got, " ") != "755 1000:1000 1777 0:0 500000" {
		t.Errorf("made parents and size inside: %q, want 755 1000:1000 for new directories and /tmp untouched", res.Stdout)
	}

	// Overwriting applies the new mode and owner too.
	if err := c.PushFile(ctx, name, "/home/agent/.isx-mcp/tasks/t1/prompt", strings.NewReader("short"), incus.FileOptions{}); err != nil {
		t.Fatal(err)
	}
	body, info, err = c.OpenFile(ctx, name, "/home/agent/.isx-mcp/tasks/t1/prompt")
	if err != nil {
		t.Fatal(err)
	}
	short, err := io.ReadAll(body)
	body.Close()
	if err != nil || string(short) != "short" || info.Mode != 0o644 || info.UID != 0 {
		t.Errorf("overwritten file = %q %+v, %v", short, info, err)
	}

	if err := c.PushFile(ctx, name, "/no/such/dir/f", strings.NewReader("x"), incus.FileOptions{}); !errors.Is(err, incus.ErrNotFound) ||
		!strings.Contains(err.Error(), "MakeParents") {
		t.Errorf("push into a missing directory: %v, want ErrNotFound suggesting MakeParents", err)
	}
	if _, err := c.PullFile(ctx, name, "/no/such/file"); !errors.Is(err, incus.ErrNotFound) {
		t.Errorf("pull of a missing file: %v, want ErrNotFound", err)
	}
	if _, err := c.PullFile(ctx, name, "/etc"); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Errorf("pull of a directory: %v, want an error saying it is a directory", err)
	}
	if err := c.PushFile(ctx, name, "/home/agent/.isx-mcp", strings.NewReader("x"), incus.FileOptions{}); err == nil {
		t.Error("a file replaced a directory")
	}
	if err := c.PushFile(ctx, name, "relative/path", strings.NewReader("x"), incus.FileOptions{}); err == nil {
		t.Error("a relative path was accepted")
	}
	if err := c.DeleteFile(ctx, name, "/home/agent/.isx-mcp/tasks/t1/prompt"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PullFile(ctx, name, "/home/agent/.isx-mcp/tasks/t1/prompt"); !errors.Is(err, incus.ErrNotFound) {
		t.Errorf("pull after delete: %v, want ErrNotFound", err)
	}
}
