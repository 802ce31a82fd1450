package instance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/incusspawn/isx/internal/isx/incus"
)

// KeyCoordinator grants an instance the right to call isx mcp at
// https://mcp.isx.internal/mcp. Its value is the instance's own
// volatile.uuid, so that a copy (which Incus gives a uuid of its own)
// never inherits the grant, however it was copied; Branch also drops it.
const KeyCoordinator = Prefix + "coordinator"

// CoordinatorHost and CoordinatorURL are where a coordinator reaches
// isx mcp from inside.
const (
	CoordinatorHost = "mcp.isx.internal"
	CoordinatorURL  = "https://" + CoordinatorHost + "/mcp"
)

// CoordinatorDevice is a coordinator's second way to the host proxy:
// TLS on port 443 of its own loopback, which /etc/hosts names
// mcp.isx.internal, so that a client that uses no proxy (a systemd unit
// without the proxy's environment) reaches isx mcp at its URL too.
const (
	CoordinatorDevice  = "isx-proxy-tls"
	CoordinatorAddress = "127.0.0.1:443"
)

// CoordinatorSocket is the host socket the CoordinatorDevice of instance
// name connects to.
func CoordinatorSocket(proxyDir, project, name string) string {
	return strings.TrimSuffix(ProxySocket(proxyDir, project, name), ".sock") + "-tls.sock"
}

// ConnectsDirect reports whether the instance's CoordinatorDevice leads
// to socket.
func ConnectsDirect(devices map[string]map[string]string, socket string) bool {
	device := devices[CoordinatorDevice]
	return device["type"] == "proxy" && device["connect"] == "unix:"+socket && device["listen"] == "tcp:"+CoordinatorAddress
}

// CoordinatorSessionPrefix starts the isx mcp session id of a coordinator.
const CoordinatorSessionPrefix = "coordinator:"

// Coordinator reports whether the instance holds the coordinator grant:
// stamped by isx branch --mcp-client for this very instance (not a copy),
// an isx instance, not airgapped.
func Coordinator(inst *incus.Instance) bool {
	uuid := inst.Config["volatile.uuid"]
	stamps := ParseStamps(inst.Config)
	return uuid != "" && inst.Config[KeyCoordinator] == uuid && stamps.Type == TypeInstance && stamps.Network != NetworkAirgap
}

// CoordinatorSession is the isx mcp session of a coordinator: the
// instance itself, by name and uuid, so that it lasts across restarts of
// the instance and of isx, and a new coordinator under the same name is
// another session.
func CoordinatorSession(inst *incus.Instance) string {
	return CoordinatorSessionPrefix + inst.Name + "@" + inst.Config["volatile.uuid"]
}

// Grant stamps the coordinator grant on an instance isx branched.
func (m *Manager) Grant(ctx context.Context, name string) error {
	return m.Client.UpdateInstance(ctx, name, func(inst *incus.Instance) error {
		stamps := ParseStamps(inst.Config)
		switch {
		case stamps.Type != TypeInstance:
			return NewError(CodeInvalid, name, nil, "%s is not an instance isx branched", name)
		case stamps.Network == NetworkAirgap:
			return NewError(CodeInvalid, name, nil, "%s is airgapped and cannot reach isx mcp; branch it without --airgap", name)
		case inst.Config["volatile.uuid"] == "":
			return NewError(CodeInvalid, name, nil, "Incus gave %s no uuid", name)
		}
		inst.Config[KeyCoordinator] = inst.Config["volatile.uuid"]
		if m.ProxyDir != "" {
			if inst.Devices == nil {
				inst.Devices = map[string]map[string]string{}
			}
			inst.Devices[CoordinatorDevice] = map[string]string{
				"type":    "proxy",
				"listen":  "tcp:" + CoordinatorAddress,
				"connect": "unix:" + CoordinatorSocket(m.ProxyDir, m.Client.ProjectName(), name),
				"bind":    "container",
			}
		}
		return nil
	})
}

// Files of the Claude Code registration in a coordinator.
const (
	ClaudeConfig   = AgentHome + "/.claude.json"
	HeadersHelper  = "/usr/local/bin/isx-mcp-headers"
	headersProgram = "#!/bin/sh\n# The current secret of this start, for Claude Code's headersHelper.\nprintf '{\"X-Isx-Instance-Secret\": \"%s\"}\\n' \"$(cat " + SecretFile + ")\"\n"
)

// AgentHome is the agent user's home in every isx image.
const AgentHome = "/home/agent"

// agentUID is the agent user's uid and gid.
const agentUID = 1000

// Register puts isx mcp in the Claude Code of a coordinator (server isx,
// Streamable HTTP, with a headersHelper that reads the current secret at
// every start), or takes it out of an instance that is not one (a copy).
// An instance without Claude Code's settings file is left alone. It
// reports whether the file now has the server.
func Register(ctx context.Context, c *incus.Client, name string, coordinator bool) (bool, error) {
	data, err := c.PullFile(ctx, name, ClaudeConfig)
	if errors.Is(err, incus.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	settings := map[string]any{}
	if len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, &settings); err != nil {
			return false, fmt.Errorf("%s in %s is not JSON: %w", ClaudeConfig, name, err)
		}
	}
	servers, _ := settings["mcpServers"].(map[string]any)
	_, had := servers["isx"]
	if !coordinator && !had {
		return false, nil
	}
	if coordinator {
		if err := c.PushFile(ctx, name, HeadersHelper, bytes.NewReader([]byte(headersProgram)), incus.FileOptions{Mode: 0o755}); err != nil {
			return false, err
		}
		if servers == nil {
			servers = map[string]any{}
		}
		servers["isx"] = map[string]any{"type": "http", "url": CoordinatorURL, "headersHelper": HeadersHelper}
	} else {
		delete(servers, "isx")
	}
	settings["mcpServers"] = servers
	out, err := json.MarshalIndent(settings, "", "  ")
	if err != nil {
		return false, err
	}
	opts := incus.FileOptions{Mode: 0o600, UID: agentUID, GID: agentUID}
	if err := c.PushFile(ctx, name, ClaudeConfig, bytes.NewReader(append(out, '\n')), opts); err != nil {
		return false, err
	}
	return coordinator, nil
}

// hostsLine names mcp.isx.internal in a coordinator's /etc/hosts.
const hostsLine = "127.0.0.1 " + CoordinatorHost + " # isx: the host proxy's isx mcp"

// SetHosts puts mcp.isx.internal in the instance's /etc/hosts, at its
// CoordinatorDevice, or takes it out of one that is not a coordinator.
func SetHosts(ctx context.Context, c *incus.Client, name string, coordinator bool) error {
	data, err := c.PullFile(ctx, name, "/etc/hosts")
	if err != nil && !errors.Is(err, incus.ErrNotFound) {
		return err
	}
	var kept []string
	has := false
	for _, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		if line == hostsLine {
			has = true
			if !coordinator {
				continue
			}
		}
		kept = append(kept, line)
	}
	switch {
	case coordinator && has, !coordinator && !has:
		return nil
	case coordinator:
		kept = append(kept, hostsLine)
	}
	content := strings.TrimLeft(strings.Join(kept, "\n")+"\n", "\n")
	return c.PushFile(ctx, name, "/etc/hosts", strings.NewReader(content), incus.FileOptions{Mode: 0o644})
}
