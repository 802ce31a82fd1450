package proxy_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/proxy"
	"github.com/incusspawn/isx/internal/isx/proxy/proxytest"
)

// A process inside a Debian instance makes model calls through the proxy
// to the fake Messages API on host loopback, JSON and streamed, both ways
// an agent does: at the base-URL route with the instance secret as its
// API key, and at https://api.anthropic.com through HTTPS_PROXY, whose TLS
// the proxy terminates with the CA the instance trusts. Every call reaches
// the fake with the account's key and never the secret; the token counts
// equal the sums the fake sent; and a search of the instance's whole
// filesystem and of its processes' environments finds no byte of the key.
//
// ISX-171, ISX-174, ISX-176, ISX-177, ISX-180, ISX-182, ISX-281.
func TestModelCallsFromDebianInstanceISX171ISX281(t *testing.T) {
	w := newWorld(t, debianAccounts)
	w.start(w.options(clock.Real{}))
	w.branch("deb", debianAccounts, instance.NetworkProxyOnly)
	secret := w.secret("deb")
	if len(secret) != 64 {
		t.Fatalf("the instance secret is %q", secret)
	}
	route := proxytest.ClientPath + " messages -url " + proxy.AnthropicBaseURL + "/v1/messages -key-file $" + instance.SecretFileEnv
	real := proxytest.ClientPath + " messages -url https://api.anthropic.com/v1/messages"
	for _, script := range []string{route, route + " -stream", real, real + " -stream"} {
		out := w.mustRun("deb", script)
		if !strings.Contains(out, "Hello from the fake.") {
			t.Errorf("%s:\n%s", script, out)
		}
	}
	calls := w.anthropic.Calls()
	if len(calls) != 4 {
		t.Fatalf("the fake got %d calls, want 4", len(calls))
	}
	for i, c := range calls {
		if c.APIKey != w.apiKey || c.Authorization != "" {
			t.Errorf("call %d arrived with x-api-key %q and authorization %q, want the account's key alone", i, c.APIKey, c.Authorization)
		}
		for name, values := range c.Headers {
			if strings.Contains(strings.Join(values, " "), secret) || strings.HasPrefix(name, "X-Isx-") {
				t.Errorf("call %d carried the instance secret or an X-Isx header upstream: %s", i, name)
			}
		}
	}
	a := w.activity("deb")
	sum := w.anthropic.Sum()
	if a.InputTokens != sum.Input || a.OutputTokens != sum.Output || a.CacheReadInputTokens != sum.CacheRead || a.CacheCreationInputTokens != sum.CacheCreation {
		t.Errorf("counted %d/%d/%d/%d tokens, the fake sent %+v", a.InputTokens, a.OutputTokens, a.CacheReadInputTokens, a.CacheCreationInputTokens, sum)
	}
	if a.Requests != 4 || a.RequestsInFlight != 0 || a.TrafficRequests != 4 || len(a.ModelUsageProviders) != 1 || a.ModelUsageProviders[0] != proxy.ProviderAnthropic {
		t.Errorf("activity %+v", a)
	}
	last := calls[3]
	requestAt, _ := proxy.ParseTime(a.LastRequestAt)
	responseAt, _ := proxy.ParseTime(a.LastResponseAt)
	if requestAt.After(last.Received) || last.Received.Sub(requestAt) > time.Second {
		t.Errorf("last_request_at %s; the fake received the last call at %s", requestAt, last.Received)
	}
	if responseAt.Before(last.Finished.Add(-time.Millisecond)) || responseAt.Sub(last.Finished) > time.Second {
		t.Errorf("last_response_at %s; the fake finished the last call at %s", responseAt, last.Finished)
	}

	// A process started with the proxy's environment runs while the
	// instance is searched, so its environment is searched too.
	w.mustRun("deb", "nohup sleep 600 >/dev/null 2>&1 &")
	search := func(needle string) []string {
		t.Helper()
		out := w.mustRun("deb", fmt.Sprintf(`key=%q
found=$(grep -r -l -a -F -s --devices=skip -e "$key" / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev | tr '\n' ' ')
envs=$(for e in /proc/[0-9]*/environ; do tr '\0' '\n' < "$e" 2>/dev/null; done)
echo "files=[$found]"
printf '%%s\n' "$envs" | grep -c -F -e "$key" || true
printf '%%s\n' "$envs" | grep -c -F -e "ANTHROPIC_BASE_URL" || true`, needle))
		return strings.Split(strings.TrimSpace(out), "\n")
	}
	// The search finds what is there: the secret, in its file and in the
	// environment of the process started with the proxy's.
	if found := search(secret); len(found) != 3 || !strings.Contains(found[0], instance.SecretFile) || found[1] == "0" {
		t.Fatalf("the search does not find the instance secret: %q", found)
	}
	if found := search(w.apiKey); len(found) != 3 || found[0] != "files=[]" || found[1] != "0" || found[2] == "0" {
		t.Errorf("searching the instance for the key (files, environments with the key, environments with the proxy's): %q", found)
	}
}

// git clone through the proxy (with the account's GitHub token put in),
// a package download by apt's own downloader, a 100 MB download, and an
// HTTPS request the proxy only tunnels: traffic_* grows for each, the
// model call count does not.
//
// ISX-182, ISX-183.
func TestGitAndDownloadsCountAsTrafficISX183(t *testing.T) {
	w := newWorld(t, debianAccounts)
	git, err := proxytest.StartGit(t.TempDir(), w.token, "hello from the fake git host\n")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(git.Close)
	downloads, err := proxytest.StartDownloads()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(downloads.Close)
	registry := startTLS(t, "registry.npmjs.org")
	w.upstream("github.com", git.URL)
	w.upstream("deb.debian.org", downloads.URL)
	w.upstream("registry.npmjs.org", "https://"+registry.addr)
	w.start(w.options(clock.Real{}))
	w.branch("deb", debianAccounts, instance.NetworkProxyOnly)
	if err := w.client.PushFile(w.ctx(), "deb", "/tmp/registry-ca.pem", strings.NewReader(registry.caPEM), pushOpts); err != nil {
		t.Fatal(err)
	}

	before := w.activity("deb")
	out := w.mustRun("deb", "cd /tmp && git clone -q https://github.com/org/repo.git && cat repo/README.md")
	if !strings.Contains(out, "hello from the fake git host") {
		t.Fatalf("git clone: %s", out)
	}
	afterGit := w.activity("deb")
	if afterGit.TrafficRequests <= before.TrafficRequests || afterGit.TrafficBytesReceived <= before.TrafficBytesReceived || afterGit.Requests != 0 {
		t.Errorf("after git clone: %+v", afterGit)
	}
	token := false
	for _, auth := range git.Authorizations() {
		token = token || strings.HasPrefix(auth, "Basic ")
	}
	if !token {
		t.Errorf("the fake git host never saw the account's token: %v", git.Authorizations())
	}

	const pkg = 1 << 20
	out = w.mustRun("deb", fmt.Sprintf("/usr/lib/apt/apt-helper download-file http://deb.debian.org/debian/pool/main/h/hello_%d.deb /tmp/hello.deb && sha256sum /tmp/hello.deb", pkg))
	if !strings.Contains(out, proxytest.PatternSHA256(pkg)) {
		t.Errorf("apt-helper's download: %s", out)
	}
	const big = 100 << 20
	out = w.mustRun("deb", fmt.Sprintf("%s get -url http://deb.debian.org/debian/pool/main/b/big_%d.deb", proxytest.ClientPath, big))
	if !strings.Contains(out, fmt.Sprintf("bytes=%d sha256=%s", big, proxytest.PatternSHA256(big))) {
		t.Errorf("the 100 MB download: %s", out)
	}
	afterDownloads := w.activity("deb")
	if afterDownloads.TrafficRequests != afterGit.TrafficRequests+2 || afterDownloads.TrafficBytesReceived < afterGit.TrafficBytesReceived+big+pkg || afterDownloads.Requests != 0 {
		t.Errorf("after the downloads: %+v (before %+v)", afterDownloads, afterGit)
	}

	out = w.mustRun("deb", "SSL_CERT_FILE=/tmp/registry-ca.pem "+proxytest.ClientPath+" get -url https://registry.npmjs.org/left-pad")
	if !strings.Contains(out, "status=200") {
		t.Errorf("the tunnelled request: %s", out)
	}
	afterTunnel := w.activity("deb")
	if afterTunnel.TrafficRequests != afterDownloads.TrafficRequests+1 || afterTunnel.Requests != 0 || afterTunnel.TrafficInFlight != 0 {
		t.Errorf("after the tunnel: %+v", afterTunnel)
	}
	if registry.requests() != 1 {
		t.Errorf("the registry saw %d requests", registry.requests())
	}
}
