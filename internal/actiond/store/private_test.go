package store_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/coded"
)

// The SQLite database holds the local issuer's private signing key: its
// files are made 0600 even under a umask of 022 inside a 0755 directory,
// an older database's 0644 files are narrowed when it is opened, and a
// data directory others may write is refused with its path and the
// command that fixes it.
func TestDatabaseFilesArePrivate(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writes := 0
	open := func() *store.Store {
		t.Helper()
		writes++
		s, err := store.Open(ctx, store.Options{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Write(ctx, func(tx *store.Tx) error {
			_, err := tx.PutRow(ctx, account, "KVValue", "ns/k"+strconv.Itoa(writes), json.RawMessage(`{"n":1}`), 0)
			return err
		}); err != nil {
			s.Close()
			t.Fatal(err)
		}
		return s
	}
	files := []string{store.DatabaseFile, store.DatabaseFile + "-wal", store.DatabaseFile + "-shm"}
	modes := func() map[string]os.FileMode {
		got := map[string]os.FileMode{}
		for _, name := range files {
			info, err := os.Stat(filepath.Join(dir, name))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			got[name] = info.Mode().Perm()
		}
		return got
	}
	s := open()
	for name, mode := range modes() {
		if mode != 0o600 {
			t.Errorf("a new database's %s is %04o, want 0600", name, mode)
		}
	}
	// As an older actiond left them.
	for _, name := range files {
		if err := os.Chmod(filepath.Join(dir, name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	s = open()
	for name, mode := range modes() {
		if mode != 0o600 {
			t.Errorf("a reopened database's %s is %04o, want 0600", name, mode)
		}
	}
	s.Close()

	refused := func(mode os.FileMode, fix string) {
		t.Helper()
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(dir, 0o755)
		s, err := store.Open(ctx, store.Options{DataDir: dir})
		if err == nil {
			s.Close()
			t.Errorf("a data directory of mode %04o was accepted", mode)
			return
		}
		hint := coded.HintOf(err)
		if coded.CodeOf(err) != store.CodeUnsafe || !strings.Contains(err.Error(), dir) || !strings.Contains(hint, fix+" "+dir) {
			t.Errorf("mode %04o: %v (hint %q), want %s naming %s and %q", mode, err, hint, store.CodeUnsafe, dir, fix)
		}
	}
	refused(0o777, "chmod o-w")
	refused(0o757|os.ModeSticky, "chmod o-w")
	refused(0o703, "chmod o-w")

	// Group-writable: refused for a group other accounts have, accepted
	// for the user's own private group.
	if gid, ok := sharedGroup(t); ok && os.Geteuid() == 0 {
		if err := os.Chown(dir, 0, gid); err != nil {
			t.Fatal(err)
		}
		refused(0o775, "chmod g-w")
		if err := os.Chown(dir, 0, os.Getegid()); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o775); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(ctx, store.Options{DataDir: dir})
	if private := privateGroupOfMine(t); private && err != nil {
		t.Errorf("g+w for the user's own private group: %v", err)
	} else if !private && coded.CodeOf(err) != store.CodeUnsafe {
		t.Errorf("g+w for a group others share: %v", err)
	}
	if err == nil {
		s.Close()
	}
}

// sharedGroup finds the primary group of another account.
func sharedGroup(t *testing.T) (int, bool) {
	me := strconv.Itoa(os.Geteuid())
	mine := strconv.Itoa(os.Getegid())
	found := -1
	eachLine(t, "/etc/passwd", func(f []string) {
		if found < 0 && len(f) >= 4 && f[2] != me && f[3] != mine {
			found, _ = strconv.Atoi(f[3])
		}
	})
	return found, found >= 0
}

// privateGroupOfMine says whether the user's primary group is theirs
// alone, as /etc/passwd and /etc/group say.
func privateGroupOfMine(t *testing.T) bool {
	me := strconv.Itoa(os.Geteuid())
	mine := strconv.Itoa(os.Getegid())
	private := true
	eachLine(t, "/etc/passwd", func(f []string) {
		if len(f) >= 4 && f[3] == mine && f[2] != me {
			private = false
		}
	})
	eachLine(t, "/etc/group", func(f []string) {
		if len(f) >= 4 && f[2] == mine && f[3] != "" {
			for _, m := range strings.Split(f[3], ",") {
				if u, _ := lookupName(me); m != u {
					private = false
				}
			}
		}
	})
	return private
}

func lookupName(uid string) (string, bool) {
	name := ""
	f, err := os.Open("/etc/passwd")
	if err != nil {
		return "", false
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		if fields := strings.Split(lines.Text(), ":"); len(fields) >= 3 && fields[2] == uid {
			name = fields[0]
		}
	}
	return name, name != ""
}

func eachLine(t *testing.T, path string, line func([]string)) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		line(strings.Split(lines.Text(), ":"))
	}
}
