package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/proxy/proxytest"
)

// ISX-237: the coordinator grant is read again for every request, not
// only for a new connection (a POST without Mcp-Session-Id, which the
// client decides): a session established before the grant was withdrawn
// is refused from then on.
func TestCoordinatorGrantCheckedOnEveryRequest(t *testing.T) {
	w := newProxyWorld(t)
	if err := os.WriteFile(config.MCPPath(w.home), []byte("templates: ["+proxyTemplate+"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w.ok("branch", "coord", "--from", proxyTemplate, "--proxy-only", "--mcp-client")
	proxytest.PushClient(t, w.client, "coord")
	const release, output = "/tmp/grant-withdrawn", "/tmp/held.out"
	done := make(chan error, 1)
	go func() {
		_, err := w.client.Exec(context.Background(), "coord", incus.ExecRequest{
			Command: []string{"sh", "-c", ". " + instance.ProfileFile + "; " + mcpInside + "held " + release + " >" + output + " 2>&1"},
			Timeout: 4 * time.Minute,
		})
		done <- err
	}()
	held := func() string {
		data, _ := w.client.PullFile(context.Background(), "coord", output)
		return string(data)
	}
	incustest.WaitFor(t, "the held client's session", 2*time.Minute, func() bool {
		out := held()
		return strings.Contains(out, "first=") || strings.Contains(out, "instanceclient:")
	})
	if out := held(); !strings.Contains(out, "first=ok") {
		t.Fatalf("the held client did not start its session:\n%s", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := w.client.UpdateInstance(ctx, "coord", func(inst *incus.Instance) error {
		delete(inst.Config, instance.KeyCoordinator)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	w.inside("coord", "touch "+release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	out := held()
	if !strings.Contains(out, "first=ok") || !strings.Contains(out, "then=refused") || !strings.Contains(out, "Forbidden") {
		t.Errorf("the session established before the grant was withdrawn:\n%s", out)
	}
}
