package instance

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/incusspawn/isx/internal/isx/incus"
)

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
	// (a busybox one) and /etc/hosts is set; a proxy restarting only
	// writes the files again.
	Fresh bool
	// Coordinator says the instance holds the coordinator grant, so that
	// /etc/hosts names mcp.isx.internal (and otherwise does not).
	Coordinator bool
}

// Prepared is what Prepare found.
type Prepared struct {
	// ClaudeNamesISX: Claude Code's settings in the instance mention an
	// isx server (a copy of a coordinator's), which Register then reads.
	ClaudeNamesISX bool
	// Problem is a part that did not take and does not stop the
	// instance being served (its /etc/hosts), for the proxy's log.
	Problem string
}

// Prepare makes RunDir a tmpfs, writes the secret, the CA, the CA bundle
// with it and the profile, starts the relay, and on a fresh start brings
// loopback up and sets /etc/hosts: all in one command in the instance
// (a command costs Incus about 100 ms, a file operation 10 to 150), with
// the contents in its environment, which only root in the instance reads
// (a command line every user can).
func Prepare(ctx context.Context, c *incus.Client, name string, p Preparation) (Prepared, error) {
	script := runDirScript
	if p.Fresh {
		script += loopbackScript
	}
	script += filesScript + relayScript
	if p.Fresh {
		script += hostsScript + claudeScript
	}
	env := map[string]string{"ISX_SECRET": p.Secret, "ISX_CA": string(p.CA), "ISX_PROFILE": p.Profile, "ISX_COORDINATOR": "0", "ISX_HOSTS_LINE": hostsLine}
	if p.Coordinator {
		env["ISX_COORDINATOR"] = "1"
	}
	res, err := c.Exec(ctx, name, incus.ExecRequest{Command: []string{"sh", "-c", script}, Env: env, Timeout: 30 * time.Second})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("exit %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	if err != nil {
		return Prepared{}, NewError(CodePrepareFailed, name, err, "the host proxy could not prepare instance %s for this start", name)
	}
	var prepared Prepared
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		switch {
		case line == claudeNamesISX:
			prepared.ClaudeNamesISX = true
		case strings.HasPrefix(line, hostsFailed):
			prepared.Problem = "cannot set mcp.isx.internal in /etc/hosts: " + strings.TrimPrefix(line, hostsFailed)
		}
	}
	return prepared, nil
}

// The scripts fork as little as they can: a fork and exec in an
// instance that is still booting costs 5 to 20 ms on a small host, and
// the first version of them, forking for every file, took 0.4 s.

// runDirScript makes RunDir a tmpfs of its own unless it is one: what a
// secret written on the root disk would do is go with every copy and
// stay after a stop. Whatever an earlier isx left on the disk there is
// removed first. It fails, so that nothing is written, when no tmpfs can
// be had.
const runDirScript = `set -f
d=` + RunDir + `
# systemd mounts a tmpfs on /run first thing: one mounted below it before
# would be hidden. (The proxy may come that early: isx hands an instance
# out while it boots.)
i=0
init=; read -r init </proc/1/comm
while [ "$init" = systemd ] && [ ! -d /run/systemd/system ] && [ $i -lt 200 ]; do
	sleep 0.05; i=$((i+1))
done
# A mount at $d whose filesystem (after the " - ") is tmpfs.
top() { grep -q "^[^ ]* [^ ]* [^ ]* [^ ]* $d .* - tmpfs " /proc/self/mountinfo; }
if ! top; then
	rm -rf "$d" && mkdir -p "$d" && mount -t tmpfs -o mode=0755,nosuid,nodev,noexec,size=8m isx "$d" && top ||
		{ echo "cannot mount a tmpfs at $d, so the instance secret would be kept on disk" >&2; exit 1; }
fi
`

// loopbackScript brings lo up where no init did. It is a no-op where lo
// is up or no ip command exists (an init that brings lo up does).
const loopbackScript = `lo=; read -r lo </sys/class/net/lo/operstate 2>/dev/null
[ "$lo" != down ] || ! command -v ip >/dev/null || ip link set lo up
`

// filesScript writes the files. The secret is renamed into place, so
// that an agent reading it while a restarted proxy writes it again never
// sees half; the others say the same at every write. The CA bundle is the
// instance's own (Debian's path) with the proxy's CA after it (a blank
// line between is nothing to a PEM reader); an instance without one
// trusts the proxy's CA alone.
const filesScript = `umask 022
s=` + SecretFile + `
{ printf '%s\n' "$ISX_SECRET" >"$s.isx-new" && mv -f "$s.isx-new" "$s" &&
	printf '%s' "$ISX_CA" >` + CAFile + ` &&
	{ t=` + systemTrust + `; if [ -f "$t" ]; then cat "$t" && echo; fi && printf '%s' "$ISX_CA"; } >` + TrustFile + ` &&
	{ [ -d ` + profileDir + ` ] || mkdir -p ` + profileDir + `; } && printf '%s' "$ISX_PROFILE" >` + ProfileFile + `; } ||
	{ echo "cannot write the instance secret, the proxy's CA and the profile" >&2; exit 1; }
`

// relayScript starts the relay unless this start's relay runs: the pid
// file is on RunDir's tmpfs, and a pid is this relay's only while its
// program is RelayPath. It runs after loopbackScript, since the relay
// binds the loopback, and fails when the relay cannot listen.
const relayScript = `p=; read -r p <` + RelayPIDFile + ` 2>/dev/null
if [ -z "$p" ] || ! [ /proc/"$p"/exe -ef ` + RelayPath + ` ]; then
	` + RelayPath + ` -pidfile ` + RelayPIDFile + ` ` + ProxyAddress + `=` + InstanceSocket + ` ||
		{ echo "cannot start ` + RelayPath + `, which lets the instance reach the host proxy at ` + ProxyAddress + `" >&2; exit 1; }
fi
`

// hostsScript names mcp.isx.internal in a coordinator's /etc/hosts and
// takes it out of any other's (a copy of a coordinator). A failure is
// reported, not fatal: the instance reaches the proxy all the same.
const hostsScript = `h=/etc/hosts; l=$ISX_HOSTS_LINE
if [ "$ISX_COORDINATOR" = 1 ]; then
	grep -qxF "$l" "$h" 2>/dev/null || printf '%s\n' "$l" >>"$h" || echo "` + hostsFailed + `cannot append to $h"
elif [ -f "$h" ] && grep -qxF "$l" "$h"; then
	{ grep -vxF "$l" "$h" >"$h.isx-new" || [ $? = 1 ]; } && cat "$h.isx-new" >"$h" && rm -f "$h.isx-new" || echo "` + hostsFailed + `cannot rewrite $h"
fi
`

// claudeScript says whether Claude Code's settings mention an isx
// server, for Register to read them only then.
const claudeScript = `[ ! -f ` + ClaudeConfig + ` ] || ! grep -q '"isx"' ` + ClaudeConfig + ` || echo ` + claudeNamesISX + `
exit 0
`

// Markers Prepare reads in the script's output.
const (
	claudeNamesISX = "isx-claude-names-isx"
	hostsFailed    = "isx-hosts-failed: "
)
