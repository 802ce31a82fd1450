package mcpserver

import (
	"bytes"
	endian "encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// hostWatch reports every access inotify sees under a directory tree of
// the host: opens, reads, writes, attribute changes, creations and
// removals. Watches are per directory, so each one of the tree gets its
// own.
type hostWatch struct {
	fd    int
	paths map[int32]string
}

func watchTree(t testing.TB, root string) *hostWatch {
	t.Helper()
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		t.Fatalf("inotify: %v", err)
	}
	w := &hostWatch{fd: fd, paths: map[int32]string{}}
	t.Cleanup(func() { syscall.Close(fd) })
	err = filepath.WalkDir(root, func(path string, entry fs.DirEntry, err error) error {
		if err != nil || !entry.IsDir() {
			return err
		}
		wd, err := syscall.InotifyAddWatch(fd, path, syscall.IN_ALL_EVENTS)
		if err != nil {
			return fmt.Errorf("watching %s: %w", path, err)
		}
		w.paths[int32(wd)] = path
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Walking the tree opened its directories; those events are ours.
	w.events(t)
	return w
}

// events drains what inotify has seen since the last call, as
// "path: mask" lines.
func (w *hostWatch) events(t testing.TB) []string {
	t.Helper()
	var out []string
	buf := make([]byte, 64<<10)
	for {
		n, err := syscall.Read(w.fd, buf)
		if err == syscall.EAGAIN || n == 0 {
			return out
		}
		if err != nil {
			t.Fatalf("reading inotify events: %v", err)
		}
		for rest := buf[:n]; len(rest) >= syscall.SizeofInotifyEvent; {
			var head syscall.InotifyEvent
			if err := endian.Read(bytes.NewReader(rest[:syscall.SizeofInotifyEvent]), endian.NativeEndian, &head); err != nil {
				t.Fatal(err)
			}
			name := string(bytes.TrimRight(rest[syscall.SizeofInotifyEvent:syscall.SizeofInotifyEvent+int(head.Len)], "\x00"))
			out = append(out, fmt.Sprintf("%s: %#x", filepath.Join(w.paths[head.Wd], name), head.Mask))
			rest = rest[syscall.SizeofInotifyEvent+int(head.Len):]
		}
	}
}

// hostCheckout is a git checkout on the host with one commit, for a
// server to run in while it is watched.
func hostCheckout(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("the host's own notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"init", "-q"},
		{"add", "notes.txt"},
		{"-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "host"},
	} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	return dir
}

// The watch sees a plain read and a write in the checkout, so its silence
// in the delegate flow means something.
func TestHostWatchSeesAccess(t *testing.T) {
	dir := hostCheckout(t)
	watch := watchTree(t, dir)
	if seen := watch.events(t); len(seen) != 0 {
		t.Fatalf("events before anything was done: %v", seen)
	}
	if _, err := os.ReadFile(filepath.Join(dir, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	if seen := watch.events(t); len(seen) == 0 {
		t.Error("reading notes.txt was not seen")
	}
	if err := os.WriteFile(filepath.Join(dir, ".git", "scratch"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if seen := watch.events(t); len(seen) == 0 {
		t.Error("writing in .git was not seen")
	}
}
