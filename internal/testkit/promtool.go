package testkit

import (
	"bytes"
	"os/exec"
	"testing"
)

// PromtoolCheck lints a Prometheus exposition with `promtool check
// metrics`, which Debian's prometheus package installs
// (scripts/install-promtool.sh). Without promtool the test fails: a lint
// that did not run proves nothing.
func PromtoolCheck(t testing.TB, exposition []byte) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is not installed (scripts/install-promtool.sh installs it): %v", err)
	}
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = bytes.NewReader(exposition)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
