package instance

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// ISX-207: while an `isx shell` runs in an instance, Attended says so; once
// its process is gone (removed record, killed process, reused pid), it
// does not.
func TestAttended(t *testing.T) {
	home := t.TempDir()
	if Attended(home, "p", "work") {
		t.Fatalf("attended with no records at all")
	}
	release, err := MarkShell(home, "p", "work", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !Attended(home, "p", "work") {
		t.Errorf("not attended while the shell is recorded")
	}
	for _, other := range [][2]string{{"p", "other"}, {"q", "work"}, {"p", "wor"}} {
		if Attended(home, other[0], other[1]) {
			t.Errorf("%s/%s counts as attended", other[0], other[1])
		}
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if Attended(home, "p", "work") {
		t.Errorf("still attended after release")
	}

	// A shell whose process died without removing its record.
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := MarkShell(home, "p", "work", cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if !Attended(home, "p", "work") {
		t.Errorf("a live shell process is not counted")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatalf("sleep was not killed")
	}
	if Attended(home, "p", "work") {
		t.Errorf("a dead shell process still counts")
	}
	if entries, _ := os.ReadDir(ShellsDir(home)); len(entries) != 0 {
		t.Errorf("the stale record was not removed: %v", entries)
	}

	// A record naming a live pid that started at another time: reused.
	file := filepath.Join(ShellsDir(home), "p.work."+strconv.Itoa(os.Getpid()))
	if err := os.WriteFile(file, []byte(strconv.Itoa(os.Getpid())+" 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if Attended(home, "p", "work") {
		t.Errorf("a reused pid counts as the shell")
	}
}

// A shell in the default project is recorded under "default", however the
// project is named.
func TestAttendedDefaultProject(t *testing.T) {
	home := t.TempDir()
	release, err := MarkShell(home, "", "work", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := release(); err != nil {
			t.Error(err)
		}
	}()
	if !Attended(home, "default", "work") || !Attended(home, "", "work") {
		t.Errorf("default project not matched")
	}
}

// Unreadable records count as attended: a sweep must not guess.
func TestAttendedUnreadable(t *testing.T) {
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Dir(ShellsDir(home)), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ShellsDir(home), []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	if !Attended(home, "p", "work") {
		t.Errorf("unreadable records counted as nobody there")
	}
}
