package mcpserver

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/incusspawn/isx/internal/isx/audit"
	"github.com/incusspawn/isx/internal/isx/deadline"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/template"
)

// The coordinator's listener (isx mcp --coordinator NAME --listen) keeps
// no connection a slow client holds: headers that stop coming, a body
// sent a byte at a time and a kept-alive connection left idle are each
// closed, while a real client is served. The limits are short here.
func TestCoordinatorListenerCutsSlowClients(t *testing.T) {
	dir := t.TempDir()
	s, err := New(Options{
		Home:      dir,
		Client:    incus.New(filepath.Join(dir, "none.socket")),
		Templates: func() (*template.Set, error) { return template.NewSet() },
		Owner:     "test", Session: "coordinator:coord@uuid", Coordinator: true,
		Log:        audit.Open(filepath.Join(dir, "mcp.log"), audit.Options{}),
		HTTPLimits: deadline.Limits{Header: time.Second, Idle: time.Second, Window: time.Second, Progress: 1 << 10, Write: 2 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "c.sock")
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.ServeHTTP(ctx, l) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("ServeHTTP: %v", err)
		}
	}()
	dial := func(t *testing.T) net.Conn {
		t.Helper()
		c, err := net.Dial("unix", socket)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// closedWithin reads c until the server closes it, for up to a minute.
	closed := func(t *testing.T, c net.Conn) bool {
		t.Helper()
		c.SetReadDeadline(time.Now().Add(time.Minute)) //nolint:errcheck // a read that times out fails the test
		_, err := io.Copy(io.Discard, c)
		return err == nil || errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "reset")
	}

	t.Run("a real client", func(t *testing.T) {
		client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
		session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://isx-mcp/", HTTPClient: &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", socket)
			},
		}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer session.Close()
		if tools, err := session.ListTools(ctx, nil); err != nil || len(tools.Tools) == 0 {
			t.Errorf("tools/list: %v", err)
		}
	})
	t.Run("headers that stop", func(t *testing.T) {
		c := dial(t)
		io.WriteString(c, "POST / HTTP/1.1\r\nHost: isx-mcp\r\n") //nolint:errcheck // the server's side tells
		if !closed(t, c) {
			t.Error("a request whose headers stopped coming kept its connection")
		}
	})
	t.Run("body a byte at a time", func(t *testing.T) {
		c := dial(t)
		io.WriteString(c, "POST / HTTP/1.1\r\nHost: isx-mcp\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100000\r\n\r\n{") //nolint:errcheck // as above
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
			}
		}()
		if !closed(t, c) {
			t.Error("a body sent a byte at a time kept its connection")
		}
	})
	t.Run("idle keep-alive", func(t *testing.T) {
		c := dial(t)
		io.WriteString(c, "GET /nothing HTTP/1.1\r\nHost: isx-mcp\r\n\r\n") //nolint:errcheck // as above
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if !closed(t, c) {
			t.Error("an idle kept-alive connection was kept")
		}
	})
}
