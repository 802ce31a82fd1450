package instance

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
)

// How an instance reaches the host proxy. An instance with a network mode
// other than airgap gets a directory of the host proxy's own for that
// instance (ProxyRoot) as a read-only disk device, ProxyDevice, at
// ProxyMount, and the relay program as another, RelayDevice, at
// RelayPath. At every start the host proxy listens on the socket in that
// directory (ProxySocket) and starts the relay, which listens inside the
// instance on ProxyAddress and connects each connection to the socket:
// the socket a request arrives on names the instance, whatever the
// instance says. At every start the proxy also writes a new secret to
// SecretFile, which every request must carry.
//
// (An Incus proxy device would do the relay's work, but incusd polls a
// new forkproxy's log once a second, at every start: a second on the way
// to every instance being ready.)
const (
	// ProxyDevice is the name of the disk device sharing ProxyRoot.
	ProxyDevice = "isx-proxy"
	// RelayDevice is the name of the disk device sharing the relay.
	RelayDevice = "isx-relay"
	// ProxyAddress is where processes in the instance reach the host
	// proxy: plain HTTP on the instance's own loopback.
	ProxyAddress = "127.0.0.1:3128"
	// ProxyMount is where ProxyRoot appears in the instance, and
	// InstanceSocket the proxy's socket there. Not under /run, which an
	// init mounts a tmpfs over after Incus mounted its disks.
	ProxyMount     = "/opt/isx/proxy"
	InstanceSocket = ProxyMount + "/" + socketName
	// RelayPath is the relay program in the instance.
	RelayPath = "/opt/isx/relay"
	// RelayPIDFile holds the pid of this start's relay.
	RelayPIDFile = RunDir + "/relay.pid"

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
	ProfileFile = profileDir + "/isx-proxy.sh"
	profileDir  = "/etc/profile.d"

	// socketName is the proxy's socket in ProxyRoot.
	socketName = "proxy.sock"
	// systemTrust is where Debian keeps the CA bundle.
	systemTrust = "/etc/ssl/certs/ca-certificates.crt"
	// maxSocketPath is the longest path a unix socket address holds.
	maxSocketPath = 107
)

// ProxySocketDir is the directory of the host proxy's per-instance
// directories and sockets, inside the proxy's directory (config.ProxyDir).
func ProxySocketDir(proxyDir string) string { return filepath.Join(proxyDir, "i") }

// ProxyRoot is the host directory shared into instance name of project,
// holding only its socket of the host proxy. The name is a digest of
// project and instance, so that the socket's path stays short enough for
// a socket address.
func ProxyRoot(proxyDir, project, name string) string {
	if project == "" {
		project = "default"
	}
	sum := sha256.Sum256([]byte(project + "/" + name))
	return filepath.Join(ProxySocketDir(proxyDir), hex.EncodeToString(sum[:8]))
}

// ProxySocket is the host socket the relay of instance name in project
// reaches through ProxyDevice.
func ProxySocket(proxyDir, project, name string) string {
	return filepath.Join(ProxyRoot(proxyDir, project, name), socketName)
}

// proxyDevices are the devices that connect instance name to the host
// proxy of proxyDir. Their sources are made here: the instance's directory (reachable,
// not listable, by the instance's users: the directories above it stay
// the user's alone) and the relay, installed from RelaySource.
func proxyDevices(proxyDir, project, name string) (map[string]map[string]string, error) {
	socket := ProxySocket(proxyDir, project, name)
	if len(socket) > maxSocketPath {
		return nil, NewError(CodeInvalid, name, nil, "the host proxy's socket %s is longer than the %d characters a unix socket path may have; use a shorter home directory", socket, maxSocketPath)
	}
	root := ProxyRoot(proxyDir, project, name)
	if err := MakeProxyRoot(root); err != nil {
		return nil, NewError(CodeBranchFailed, name, err, "cannot make the host proxy's directory %s for %s", root, name)
	}
	relay, err := InstallRelay(proxyDir)
	if err != nil {
		return nil, NewError(CodeBranchFailed, name, err, "cannot install the relay %s needs to reach the host proxy", name)
	}
	// Not required: an instance whose directory went (its proxy's
	// directory removed) still starts and stops, and the proxy's
	// preparation then says it cannot start the relay, rather than Incus
	// refusing the instance.
	return map[string]map[string]string{
		ProxyDevice: {"type": "disk", "source": root, "path": ProxyMount, "readonly": "true", "required": "false"},
		RelayDevice: {"type": "disk", "source": relay, "path": RelayPath, "readonly": "true", "required": "false"},
	}, nil
}

// MakeProxyRoot makes the instance's directory of the host proxy if it is
// not there: Incus mounts it at a start only if it is.
func MakeProxyRoot(root string) error {
	if err := os.MkdirAll(filepath.Dir(root), 0o700); err != nil {
		return err
	}
	if err := os.Mkdir(root, 0o711); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	// Mkdir's mode passes through the umask.
	return os.Chmod(root, 0o711)
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

// ConnectsTo reports whether the instance's devices lead to socket: the
// host proxy serves an instance only on the socket its device shares.
func ConnectsTo(devices map[string]map[string]string, socket string) bool {
	device := devices[ProxyDevice]
	return device["type"] == "disk" && device["source"] == filepath.Dir(socket) && device["path"] == ProxyMount &&
		filepath.Base(socket) == socketName && devices[RelayDevice]["path"] == RelayPath
}
