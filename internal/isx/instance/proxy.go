package instance

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/incusspawn/isx/internal/isx/incus"
)

// How an instance reaches the host proxy. An instance with a network mode
// other than airgap gets an Incus proxy device, ProxyDevice, listening
// inside it on ProxyAddress and connecting to a unix socket of the host
// proxy's own for that instance (ProxySocket): the socket a request
// arrives on names the instance, whatever the instance says. At every
// start the host proxy writes a new secret to SecretFile, which every
// request must also carry.
const (
	// ProxyDevice is the name of the Incus proxy device.
	ProxyDevice = "isx-proxy"
	// ProxyAddress is where processes in the instance reach the host
	// proxy: plain HTTP on the instance's own loopback.
	ProxyAddress = "127.0.0.1:3128"

	// RunDir holds what the host proxy writes into the instance at every
	// start. The proxy mounts a tmpfs of its own there before it writes
	// anything (an image's /run may be on the root disk), so none of it
	// survives a stop or travels with a copy.
	RunDir = "/run/isx"
	// SecretFile holds the instance secret of the current start.
	SecretFile = RunDir + "/instance-secret"
	// SecretFileEnv names SecretFile in the environment of the instance.
	SecretFileEnv = "ISX_INSTANCE_SECRET_FILE"
	// CAFile is the host proxy's CA certificate (PEM), for the hosts whose
	// TLS the proxy terminates to inject credentials.
	CAFile = RunDir + "/proxy-ca.pem"
	// TrustFile is the instance's own CA bundle with CAFile added, for
	// programs told where their CA bundle is (SSL_CERT_FILE and the like).
	TrustFile = RunDir + "/ca-certificates.crt"
	// ProfileFile sets a login shell's environment to use the proxy.
	ProfileFile = "/etc/profile.d/isx-proxy.sh"

	// systemTrust is where Debian keeps the CA bundle.
	systemTrust = "/etc/ssl/certs/ca-certificates.crt"
	// maxTrust bounds the bundle read from the instance.
	maxTrust = 4 << 20
	// maxSocketPath is the longest path a unix socket address holds.
	maxSocketPath = 107
)

// ProxySocketDir is the directory of the host proxy's per-instance
// sockets, inside the proxy's directory (config.ProxyDir).
func ProxySocketDir(proxyDir string) string { return filepath.Join(proxyDir, "i") }

// ProxySocket is the host socket that the proxy device of instance name in
// project connects to. The name is a digest of project and instance, so
// that the path stays short enough for a socket address.
func ProxySocket(proxyDir, project, name string) string {
	if project == "" {
		project = "default"
	}
	sum := sha256.Sum256([]byte(project + "/" + name))
	return filepath.Join(ProxySocketDir(proxyDir), hex.EncodeToString(sum[:8])+".sock")
}

// proxyDevices are the device and environment that connect a new instance
// to the host proxy of proxyDir.
func proxyDevices(proxyDir, project, name string) (map[string]map[string]string, error) {
	socket := ProxySocket(proxyDir, project, name)
	if len(socket) > maxSocketPath {
		return nil, NewError(CodeInvalid, name, nil, "the host proxy's socket %s is longer than the %d characters a unix socket path may have; use a shorter home directory", socket, maxSocketPath)
	}
	return map[string]map[string]string{ProxyDevice: {
		"type":    "proxy",
		"listen":  "tcp:" + ProxyAddress,
		"connect": "unix:" + socket,
		"bind":    "container",
	}}, nil
}

// BuildProxy is the device and config that connect a build instance to
// the host proxy of proxyDir while it clones its tools' repositories; the
// build removes both before it stamps the template.
func BuildProxy(proxyDir, project, name string) (map[string]map[string]string, map[string]string, error) {
	devices, err := proxyDevices(proxyDir, project, name)
	if err != nil {
		return nil, nil, err
	}
	return devices, proxyEnvironment(NetworkDefault, proxyDir), nil
}

// ConnectsTo reports whether the instance's proxy device leads to socket:
// the host proxy serves an instance only on the socket its device names.
func ConnectsTo(devices map[string]map[string]string, socket string) bool {
	device := devices[ProxyDevice]
	return device["type"] == "proxy" && device["connect"] == "unix:"+socket && device["listen"] == "tcp:"+ProxyAddress
}

// Preparation is what the host proxy writes into an instance at a start.
type Preparation struct {
	// Secret is the instance secret of this start.
	Secret string
	// CA is the proxy's CA certificate, PEM.
	CA []byte
	// Profile is the shell script for ProfileFile.
	Profile string
	// Fresh says this start has not been prepared before, so that once
	// per start loopback is brought up in an instance whose init does not
	// (a busybox one); a proxy restarting only writes the files again.
	Fresh bool
}

// Prepare writes the secret, the CA, the CA bundle with it and the profile
// into a running instance through the Incus file API, once RunDir is a
// tmpfs. It runs one command in the instance for that, which once per
// start (Fresh) also brings its loopback up if it is down.
func Prepare(ctx context.Context, c *incus.Client, name string, p Preparation) error {
	fail := func(err error) error {
		return NewError(CodePrepareFailed, name, err, "the host proxy could not prepare instance %s for this start", name)
	}
	if err := prepareRunDir(ctx, c, name, p.Fresh); err != nil {
		return fail(err)
	}
	trust, err := trustBundle(ctx, c, name, p.CA)
	if err != nil {
		return fail(err)
	}
	files := []struct {
		path    string
		content []byte
	}{
		{SecretFile, []byte(p.Secret + "\n")},
		{CAFile, p.CA},
		{TrustFile, trust},
		{ProfileFile, []byte(p.Profile)},
	}
	for _, f := range files {
		opts := incus.FileOptions{Mode: 0o644, MakeParents: f.path == ProfileFile}
		if err := c.PushFile(ctx, name, f.path, bytes.NewReader(f.content), opts); err != nil {
			return fail(err)
		}
	}
	return nil
}

// trustBundle is the instance's system CA bundle with ca appended; an
// instance without one trusts ca alone.
func trustBundle(ctx context.Context, c *incus.Client, name string, ca []byte) ([]byte, error) {
	body, info, err := c.OpenFile(ctx, name, systemTrust)
	if errors.Is(err, incus.ErrNotFound) {
		return ca, nil
	}
	if err != nil {
		return nil, err
	}
	defer body.Close()
	if info.Size > maxTrust {
		return nil, fmt.Errorf("%s in %s is larger than %d bytes", systemTrust, name, maxTrust)
	}
	system, err := io.ReadAll(io.LimitReader(body, maxTrust))
	if err != nil {
		return nil, fmt.Errorf("reading %s in %s: %w", systemTrust, name, err)
	}
	if len(system) > 0 && system[len(system)-1] != '\n' {
		system = append(system, '\n')
	}
	return append(system, ca...), nil
}

// runDirScript makes RunDir a tmpfs of its own unless it is one: what a
// secret written on the root disk would do is go with every copy and
// stay after a stop. Whatever an earlier isx left on the disk there is
// removed first. It fails, so that nothing is written, when no tmpfs can
// be had.
const runDirScript = `set -f
d=` + RunDir + `
top() {
	fs=
	while IFS= read -r line; do
		set -- $line
		[ "$5" = "$d" ] || continue
		while [ $# -gt 0 ] && [ "$1" != - ]; do shift; done
		fs=$2
	done </proc/self/mountinfo
	[ "$fs" = tmpfs ]
}
if ! top; then
	rm -rf "$d" && mkdir -p "$d" && mount -t tmpfs -o mode=0755,nosuid,nodev,noexec,size=8m isx "$d" && top ||
		{ echo "cannot mount a tmpfs at $d, so the instance secret would be kept on disk" >&2; exit 1; }
fi
`

// loopbackScript brings lo up where no init did. It is a no-op where lo
// is up or no ip command exists (an init that brings lo up does).
const loopbackScript = `[ "$(cat /sys/class/net/lo/operstate 2>/dev/null)" != down ] || ! command -v ip >/dev/null || ip link set lo up
`

// prepareRunDir runs runDirScript, and on a fresh start loopbackScript.
func prepareRunDir(ctx context.Context, c *incus.Client, name string, fresh bool) error {
	script := runDirScript
	if fresh {
		script += loopbackScript
	}
	res, err := c.Exec(ctx, name, incus.ExecRequest{Command: []string{"sh", "-c", script}, Timeout: 30 * time.Second})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("preparing %s in %s: exit %d: %s", RunDir, name, res.ExitCode, res.Stderr)
	}
	return nil
}
