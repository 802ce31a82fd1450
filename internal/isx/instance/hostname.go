package instance

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/incusspawn/isx/internal/isx/incus"
)

// nameHost makes a new, stopped instance's host name its own name. Incus
// names the container's host after the instance, but an image with
// systemd sets the one in /etc/hostname at boot, which a copy keeps from
// its template (and the template from whoever made the image); and sudo
// wants the name in /etc/hosts. Both files are written before the first
// boot; /etc/hostname and the read of /etc/hosts go at once, as each
// costs Incus a mount of the stopped instance's storage.
func (m *Manager) nameHost(ctx context.Context, name string) error {
	var (
		wg                    sync.WaitGroup
		hostnameErr, hostsErr error
		hosts                 []byte
	)
	wg.Go(func() {
		hostnameErr = m.Client.OverwriteFile(ctx, name, "/etc/hostname", strings.NewReader(name+"\n"), incus.FileOptions{Mode: 0o644})
	})
	wg.Go(func() { hosts, hostsErr = m.Client.PullFile(ctx, name, "/etc/hosts") })
	wg.Wait()
	if hostnameErr != nil {
		return fmt.Errorf("writing %s's /etc/hostname: %w", name, hostnameErr)
	}
	if errors.Is(hostsErr, incus.ErrNotFound) {
		return nil // an image without /etc/hosts: nothing resolves names from it
	}
	if hostsErr != nil {
		return fmt.Errorf("reading %s's /etc/hosts: %w", name, hostsErr)
	}
	updated := HostsWithName(string(hosts), name)
	if updated == string(hosts) {
		return nil
	}
	if err := m.Client.OverwriteFile(ctx, name, "/etc/hosts", strings.NewReader(updated), incus.FileOptions{Mode: 0o644}); err != nil {
		return fmt.Errorf("writing %s's /etc/hosts: %w", name, err)
	}
	return nil
}

// loopbackHost is Debian's line naming the host: 127.0.1.1 and its names.
var loopbackHost = regexp.MustCompile(`(?m)^127\.0\.1\.1[ \t].*$`)

// HostsWithName is an /etc/hosts whose 127.0.1.1 line names name (added
// when there is none).
func HostsWithName(hosts, name string) string {
	line := "127.0.1.1\t" + name
	if loopbackHost.MatchString(hosts) {
		return loopbackHost.ReplaceAllString(hosts, line)
	}
	if hosts != "" && !strings.HasSuffix(hosts, "\n") {
		hosts += "\n"
	}
	return hosts + line + "\n"
}
