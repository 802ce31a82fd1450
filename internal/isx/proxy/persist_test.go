package proxy_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
)

// The instance secret never reaches an instance's disk: the proxy writes
// it only into a tmpfs it mounts at /run/isx, whatever the image does
// with /run. So a copy, of a running instance or of a stopped one, holds
// no secret, and neither does the stopped instance, on busybox (its /run
// a tmpfs of its init, or on the root disk) and on Debian (systemd's).
func TestSecretNeverCopied(t *testing.T) {
	w := newWorld(t, busyboxAccounts, busyboxRootRun, debianAccounts)
	w.start(w.options(clock.Real{}))
	for i, from := range []string{busyboxAccounts, busyboxRootRun, debianAccounts} {
		t.Run(from, func(t *testing.T) {
			name := []string{"bb", "bbroot", "deb"}[i]
			w.branch(name, from, instance.NetworkProxyOnly)
			secret := w.secret(name)
			if len(secret) != 64 {
				t.Fatalf("%s has no secret to lose: %q", name, secret)
			}
			if out, _ := w.run(name, "grep ' /run/isx ' /proc/self/mountinfo"); !strings.Contains(out, " - tmpfs ") {
				t.Errorf("/run/isx in %s is no tmpfs of its own:\n%s", name, out)
			}
			copyOf := func(source, copy string) {
				t.Helper()
				err := w.client.CreateInstance(w.ctx(), incus.InstanceCreate{Name: copy, Source: incus.InstanceSource{Type: "copy", Source: source, InstanceOnly: true}})
				if err != nil {
					t.Fatalf("incus copy %s %s: %v", source, copy, err)
				}
			}
			copyOf(name, name+"-live")
			if err := w.client.StopInstance(w.ctx(), name, incus.StopOptions{Force: true}); err != nil {
				t.Fatal(err)
			}
			copyOf(name, name+"-cold")
			// Incus reads a stopped instance's files from its disk.
			for _, inst := range []string{name, name + "-live", name + "-cold"} {
				for _, path := range []string{instance.SecretFile, instance.TrustFile} {
					data, err := w.client.PullFile(w.ctx(), inst, path)
					if !errors.Is(err, incus.ErrNotFound) {
						t.Errorf("%s on the disk of %s (stopped): %q, %v", path, inst, data, err)
					}
					if strings.Contains(string(data), secret) {
						t.Errorf("the disk of %s holds %s's secret", inst, name)
					}
				}
			}
		})
	}
}
