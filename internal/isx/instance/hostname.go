package instance

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/incusspawn/isx/internal/isx/incus"
)

// The metadata template files that name a copy's host, and what they
// render from: Incus's name of the instance being started.
const (
	hostnameTemplate = "isx-hostname.tpl"
	hostsTemplate    = "isx-hosts.tpl"
	instanceName     = "{{ instance.name }}"
)

// NameHostOnCopy makes every copy of the instance (each instance isx
// branch makes from it, and their copies in turn) boot with its own name
// as its host name: Incus names a container's host after the instance,
// but systemd sets the one in /etc/hostname at boot, which a copy would
// keep from its source; and sudo looks the name up in /etc/hosts. It does
// so the way images on Incus's image servers do, with metadata templates
// that incusd renders at a copy's first start: making an instance then
// costs no file operation of its own (writing the files into each new,
// stopped instance cost Incus a mount of its storage per file, and under
// twenty concurrent creates once failed). isx build calls it on the
// running build instance.
func NameHostOnCopy(ctx context.Context, c *incus.Client, name string) error {
	hosts, err := c.PullFile(ctx, name, "/etc/hosts")
	if err != nil && !errors.Is(err, incus.ErrNotFound) {
		return fmt.Errorf("reading %s's /etc/hosts: %w", name, err)
	}
	files := map[string]string{
		hostnameTemplate: instanceName + "\n",
		hostsTemplate:    HostsWithName(escapeTemplate(string(hosts)), instanceName),
	}
	entries := map[string]incus.MetadataTemplate{
		"/etc/hostname": onCopy(hostnameTemplate),
		"/etc/hosts":    onCopy(hostsTemplate),
	}
	if err := c.SetMetadataTemplates(ctx, name, files, entries); err != nil {
		return fmt.Errorf("naming the host of %s's copies: %w", name, err)
	}
	return nil
}

// onCopy renders the template when an instance is made from an image that
// carries it and when an instance is copied.
func onCopy(file string) incus.MetadataTemplate {
	return incus.MetadataTemplate{When: []string{"create", "copy"}, Template: file, Properties: map[string]string{}}
}

// escapeTemplate keeps text literal in a pongo2 template: each brace that
// could open a tag, a variable or a comment is printed by a tag of its own.
func escapeTemplate(text string) string {
	return strings.ReplaceAll(text, "{", `{{ "{" }}`)
}

// loopbackHost is Debian's line naming the host: 127.0.1.1 and its names.
var loopbackHost = regexp.MustCompile(`(?m)^127\.0\.1\.1[ \t].*$`)

// HostsWithName is an /etc/hosts whose 127.0.1.1 line names name (added
// when there is none).
func HostsWithName(hosts, name string) string {
	line := "127.0.1.1\t" + name
	if loopbackHost.MatchString(hosts) {
		return loopbackHost.ReplaceAllLiteralString(hosts, line)
	}
	if hosts != "" && !strings.HasSuffix(hosts, "\n") {
		hosts += "\n"
	}
	return hosts + line + "\n"
}
