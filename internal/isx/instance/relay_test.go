package instance

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// InstallRelay copies the relay into the proxy's directory, where every
// instance's device leads, and refuses what could not run in an image.
func TestInstallRelay(t *testing.T) {
	built := os.Getenv(RelayEnv)
	dir := t.TempDir()
	path, err := InstallRelay(dir)
	if err != nil || path != filepath.Join(dir, RelayName) {
		t.Fatalf("InstallRelay = %q, %v", path, err)
	}
	want, _ := os.ReadFile(built)
	if got, err := os.ReadFile(path); err != nil || string(got) != string(want) {
		t.Fatalf("installed relay differs from %s: %v", built, err)
	}
	// Removed behind its back, it is installed again.
	os.Remove(path)
	if _, err := InstallRelay(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("not installed again: %v", err)
	}

	t.Setenv(RelayEnv, filepath.Join(dir, "nowhere"))
	if _, err := InstallRelay(t.TempDir()); err == nil || !strings.Contains(err.Error(), "is not at "+filepath.Join(dir, "nowhere")) {
		t.Errorf("a missing relay: %v", err)
	}
	// /bin/sh on Debian needs the dynamic loader.
	t.Setenv(RelayEnv, "/bin/sh")
	if _, err := InstallRelay(t.TempDir()); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("a dynamically linked relay: %v", err)
	}
}
