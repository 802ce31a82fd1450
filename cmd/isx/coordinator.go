package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/incusspawn/isx/internal/isx/build"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/proxy"
)

// coordinatorProbe is what isx branch --mcp-client found.
type coordinatorProbe struct {
	version string
	tools   int
	err     error
	// claude: "" when the instance has no Claude Code, else what
	// `claude mcp list` said of isx.
	claude string
}

// probeCoordinator asks the new coordinator's isx mcp as the instance
// does: on the instance's own proxy socket, with its current secret, by
// CONNECT to mcp.isx.internal and TLS trusting the proxy's CA.
// An instance the proxy could not admit has nothing to answer it:
// admitted says why.
func (a *app) probeCoordinator(ctx context.Context, client *incus.Client, name string, admitted error) coordinatorProbe {
	ctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	var p coordinatorProbe
	if admitted != nil {
		p.err = fmt.Errorf("the host proxy does not serve it: %w", admitted)
	} else {
		p.version, p.tools, p.err = a.askCoordinator(ctx, client, name)
	}
	p.claude = claudeHasISX(ctx, client, name)
	return p
}

func (a *app) askCoordinator(ctx context.Context, client *incus.Client, name string) (string, int, error) {
	dir, err := a.proxyDir()
	if err != nil {
		return "", 0, err
	}
	raw, err := client.PullFile(ctx, name, instance.SecretFile)
	if err != nil {
		return "", 0, fmt.Errorf("reading the instance's secret: %w", err)
	}
	secret := strings.TrimSpace(string(raw))
	ca, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		return "", 0, fmt.Errorf("reading the host proxy's CA: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	socket := instance.ProxySocket(dir, client.ProjectName(), name)
	httpClient := &http.Client{Transport: &headerTransport{
		header: http.Header{proxy.SecretHeader: {secret}},
		inner: &http.Transport{
			Proxy: http.ProxyURL(&url.URL{Scheme: "http", User: url.UserPassword("isx", secret), Host: instance.ProxyAddress}),
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", socket)
			},
			TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		},
	}}
	c := mcp.NewClient(&mcp.Implementation{Name: "isx-branch-probe", Version: build.Version}, nil)
	session, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: instance.CoordinatorURL, HTTPClient: httpClient, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return "", 0, err
	}
	// The probe's connection ends at once: the coordinator's own client
	// is the one that stays.
	defer session.Close()
	version := session.InitializeResult().ServerInfo.Version
	tools, err := session.ListTools(ctx, nil)
	if err != nil {
		return version, 0, err
	}
	return version, len(tools.Tools), nil
}

// headerTransport adds headers to every request.
type headerTransport struct {
	header http.Header
	inner  http.RoundTripper
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for name, values := range t.header {
		r.Header[name] = values
	}
	return t.inner.RoundTrip(r)
}

// claudeHasISX runs `claude mcp list` in the instance as the agent user.
// Its health check of isx is a first connection, which on a loaded host
// can outlast Claude Code's default timeout though isx mcp answered the
// probe: the check gets a minute, and a failed one is asked once more.
// Claude Code's own start on a loaded 2-core host has taken past the
// minute and a half the whole command had before, so it gets two and a
// half.
func claudeHasISX(ctx context.Context, client *incus.Client, name string) string {
	said := ""
	for try := 0; try < 2; try++ {
		said = askClaude(ctx, client, name)
		if !strings.Contains(said, "Failed to connect") {
			break
		}
	}
	return said
}

func askClaude(ctx context.Context, client *incus.Client, name string) string {
	res, err := client.Exec(ctx, name, incus.ExecRequest{
		Command: []string{"sh", "-c", "command -v claude >/dev/null 2>&1 || exit 3; . " + instance.ProfileFile + "; cd && claude mcp list 2>&1"},
		UID:     1000, GID: 1000, Cwd: instance.AgentHome,
		Env: map[string]string{"HOME": instance.AgentHome, "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"MCP_TIMEOUT": "60000"},
		Timeout: 150 * time.Second,
	})
	switch {
	case err != nil:
		return "could not be asked: " + err.Error()
	case res.ExitCode == 3:
		return ""
	}
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		if strings.HasPrefix(line, "isx:") {
			return "lists it: " + strings.TrimSpace(line)
		}
	}
	return "does not list it"
}

// report says what the probe found, for isx branch's output.
func (p coordinatorProbe) report(name string) string {
	var b strings.Builder
	if p.err != nil {
		fmt.Fprintf(&b, "isx mcp at %s could not be reached from %s: %v\n", instance.CoordinatorURL, name, p.err)
	} else {
		fmt.Fprintf(&b, "isx mcp at %s answers %s: version %s, %d tools.\n", instance.CoordinatorURL, name, p.version, p.tools)
	}
	switch {
	case p.claude == "":
		fmt.Fprintf(&b, "%s has no Claude Code; point an MCP client at %s with the secret of $%s in %s.\n", name, instance.CoordinatorURL, instance.SecretFileEnv, proxy.SecretHeader)
	default:
		fmt.Fprintf(&b, "Claude Code in %s %s.\n", name, p.claude)
	}
	return b.String()
}
