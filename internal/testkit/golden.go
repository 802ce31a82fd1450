package testkit

import (
	"os"
	"path/filepath"
	"testing"
)

// UpdateGolden is the environment variable that rewrites golden files
// instead of comparing with them.
const UpdateGolden = "UPDATE_GOLDEN"

// Golden compares got with testdata/<name> in the test's package, or
// rewrites the file when UPDATE_GOLDEN=1.
func Golden(t testing.TB, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if os.Getenv(UpdateGolden) == "1" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (UPDATE_GOLDEN=1 writes it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs (UPDATE_GOLDEN=1 rewrites it)\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
