package server_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/server"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
)

// serveHTTP runs the server as `actiond serve` does: its own HTTP server,
// with its deadlines, on a loopback listener.
func serveHTTP(t *testing.T, o server.HTTPOptions) (string, *server.Server, store.Options) {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := listener.Addr().String()
	storeOptions := storetest.Options(t, store.SQLite)
	srv, err := server.New(context.Background(), server.Options{Store: storeOptions, PublicURL: "http://" + addr, Listen: addr, HTTP: o})
	if err != nil {
		listener.Close()
		t.Fatal(err)
	}
	hs := srv.HTTPServer()
	done := make(chan struct{})
	go func() {
		defer close(done)
		hs.Serve(listener)
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
		hs.Close()
		<-done
		srv.Close()
	})
	return addr, srv, storeOptions
}

// closedWithin reads conn until the server closes it, and says how long
// that took, failing when it has not after limit.
func closedWithin(t *testing.T, conn net.Conn, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	conn.SetReadDeadline(start.Add(limit))
	_, err := io.Copy(io.Discard, conn)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the server still holds the connection after %s", limit)
	}
	return time.Since(start)
}

// A body trickled one byte every 2 s is cut off at the body deadline,
// long before it would end; a kept-alive connection left idle is closed at
// the idle deadline; and a request that takes longer to answer than the
// body deadline is answered: the deadline bounds the body, not the work.
func TestSlowClientsDoNotHoldConnections(t *testing.T) {
	addr, _, _ := serveHTTP(t, server.HTTPOptions{BodyTimeout: 3 * time.Second, IdleTimeout: 2 * time.Second})

	t.Run("trickled body", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /financial/v1/graphql HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", addr)
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			tick := time.NewTicker(2 * time.Second)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					if _, err := conn.Write([]byte(" ")); err != nil {
						return
					}
				}
			}
		}()
		if took := closedWithin(t, conn, 20*time.Second); took > 10*time.Second {
			t.Errorf("the trickled body held the connection %s", took)
		}
	})

	t.Run("idle connection", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "GET /healthcheck HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("health check: %v %v", resp, err)
		}
		resp.Body.Close()
		if took := closedWithin(t, conn, 20*time.Second); took > 10*time.Second {
			t.Errorf("the idle connection was held %s", took)
		}
	})

	t.Run("long answer", func(t *testing.T) {
		// The body deadline is 300 ms; the request waits 1.5 s for the
		// database, which another connection holds, and is then answered.
		addr, srv, storeOptions := serveHTTP(t, server.HTTPOptions{BodyTimeout: 300 * time.Millisecond})
		token, err := srv.Issuer.Mint(auth.MintOptions{Principal: server.LocalPrincipal, Subject: "dana"})
		if err != nil {
			t.Fatal(err)
		}
		db, err := sql.Open("sqlite", "file:"+filepath.Join(storeOptions.DataDir, store.DatabaseFile)+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		conn, err := db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
			t.Fatal(err)
		}
		released := time.AfterFunc(1500*time.Millisecond, func() { conn.ExecContext(context.Background(), "COMMIT") })
		defer released.Stop()
		body, header := at.Request{Method: "tools/call", Params: map[string]any{"name": "cel", "arguments": map[string]any{"expression": "1 + 1", "intent": "Wait for the database."}}}.Body()
		started := time.Now()
		reply, err := at.PostBody(context.Background(), http.DefaultClient, "http://"+addr+"/mcp/v1/000000000000/default", token, body, header)
		took := time.Since(started)
		if err != nil || reply.Status != http.StatusOK || strings.Contains(reply.String(), `"isError":true`) || took < time.Second {
			t.Fatalf("the request answered after %s: %v %s", took, err, reply)
		}
	})
}
