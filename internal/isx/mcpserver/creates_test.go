package mcpserver

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/holding"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Creating instances while Incus stalls, many at once and with one key
// from many sessions, as found by trying isx mcp as a new user would:
// each test here failed before its fix.

// stallProxy stands between isx mcp and the Incus socket, passing every
// byte through until stall is called: then it cuts every open connection
// and hangs up on each new one at once, as a daemon that stopped
// answering, until it has hung up on rejections of them.
type stallProxy struct {
	target   string
	listener net.Listener
	mu       sync.Mutex
	conns    map[net.Conn]bool
	left     int // connections still to hang up on
	wg       sync.WaitGroup
}

func startStallProxy(t *testing.T) *stallProxy {
	t.Helper()
	dir, err := os.MkdirTemp("", "isxstall-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	l, err := net.Listen("unix", filepath.Join(dir, "incus.socket"))
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{target: incus.DefaultSocket(), listener: l, conns: map[net.Conn]bool{}}
	p.wg.Go(func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.pass(conn) })
		}
	})
	t.Cleanup(p.close)
	return p
}

func (p *stallProxy) path() string { return p.listener.Addr().String() }

func (p *stallProxy) pass(conn net.Conn) {
	defer conn.Close()
	p.mu.Lock()
	if p.left > 0 {
		p.left--
		p.mu.Unlock()
		return
	}
	p.conns[conn] = true
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, conn)
		p.mu.Unlock()
	}()
	upstream, err := net.Dial("unix", p.target)
	if err != nil {
		return
	}
	defer upstream.Close()
	done := make(chan struct{}, 2)
	go func() { io.Copy(upstream, conn); done <- struct{}{} }() //nolint:errcheck // a cut connection ends the copy
	go func() { io.Copy(conn, upstream); done <- struct{}{} }() //nolint:errcheck // a cut connection ends the copy
	<-done
}

// stall cuts every open connection and hangs up on the next rejections.
func (p *stallProxy) stall(rejections int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.left = rejections
	for conn := range p.conns {
		conn.Close()
	}
}

func (p *stallProxy) close() {
	p.listener.Close()
	p.mu.Lock()
	for conn := range p.conns {
		conn.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// A create_instance refused during a daemon stall leaves nothing behind:
// no stopped instance stamped creating (ISX-032).
func TestRefusedCreateLeavesNothingISX032(t *testing.T) {
	e := newEnv(t, buildtest.BusyBox)
	e.writeMCP("templates: [tpl-test-busybox]\n")
	p := startStallProxy(t)
	s := e.start(sessionOptions{env: []string{"INCUS_SOCKET=" + p.path()}})
	pending := make(chan refusalOrName, 1)
	go func() {
		res, err := s.cs.CallTool(e.ctx(), callParams("create_instance", map[string]any{"template": "tpl-test-busybox"}))
		if err != nil {
			pending <- refusalOrName{err: err}
			return
		}
		pending <- refusalOrName{code: refusalCode(res), text: resultText(res)}
	}()
	incustest.WaitFor(t, "the instance to be made", time.Minute, func() bool { return len(e.mcpInstances()) > 0 })
	p.stall(6)
	got := <-pending
	if got.err != nil {
		t.Fatalf("create_instance: %v", got.err)
	}
	t.Logf("create_instance during the stall: code %q: %s", got.code, got.text)
	if got.code == "" {
		// The copy had finished before the stall and the call went on
		// afterwards: a success is fine, as long as it is whole.
		if names := e.mcpInstances(); len(names) != 1 {
			t.Fatalf("after a successful create: %v", names)
		}
		return
	}
	if got.code != string(CodeUnavailable) {
		t.Errorf("refusal code %s, want unavailable", got.code)
	}
	if names := e.mcpInstances(); len(names) != 0 {
		t.Errorf("a refused create left %v behind (state %q)", names, e.instanceConfig(names[0])["user.isx.mcp-state"])
	}
}

type refusalOrName struct {
	code, text string
	err        error
}

// Creations without a key run at once, in one session and across
// sessions, while max-instances stays exact: 20 calls from 3 sessions at
// max-instances 8 make exactly 8 instances and 12 limit refusals, and
// leave nothing else behind (ISX-056, ISX-032).
func TestConcurrentCreatesISX056(t *testing.T) {
	e := newEnv(t, buildtest.BusyBox)
	e.writeMCP("templates: [tpl-test-busybox]\nmax-instances: 8\n")
	sessions := []*session{e.start(sessionOptions{}), e.start(sessionOptions{}), e.start(sessionOptions{})}
	// One create alone, for the time a create takes here.
	began := time.Now()
	var one CreateInstanceResult
	sessions[0].ok("create_instance", map[string]any{"template": "tpl-test-busybox"}, &one)
	single := time.Since(began)
	sessions[0].ok("destroy_instance", map[string]any{"instance": one.Instance}, nil)

	// Incus's lifecycle events show whether one session's creates
	// overlapped: made one after another, each instance is created and
	// started before the session's next is created.
	watch, stopWatching := context.WithCancel(context.Background())
	defer stopWatching()
	stream, err := e.client.Events(watch, incus.EventLifecycle)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		codes  = map[string]int{}
		made   []string
		madeBy = map[string]int{} // instance → the index of its session
		wg     sync.WaitGroup
	)
	began = time.Now()
	for i := range 20 {
		s := sessions[i%3]
		wg.Go(func() {
			res, err := s.cs.CallTool(context.Background(), callParams("create_instance", map[string]any{"template": "tpl-test-busybox"}))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				codes["error: "+err.Error()]++
			case res.IsError:
				codes[refusalCode(res)]++
				if refusalCode(res) != string(CodeLimit) {
					t.Logf("refused: %s", resultText(res))
				}
			default:
				codes["ok"]++
				name := res.StructuredContent.(map[string]any)["instance"].(string)
				made = append(made, name)
				madeBy[name] = i % 3
			}
		})
	}
	wg.Wait()
	wall := time.Since(began)
	t.Logf("one create %s; 20 at once %s: %v", single, wall, codes)
	if codes["ok"] != 8 || codes[string(CodeLimit)] != 12 || len(codes) != 2 {
		t.Errorf("outcomes %v, want 8 ok and 12 limit", codes)
	}
	names := e.mcpInstances()
	sort.Strings(names)
	sort.Strings(made)
	if strings.Join(names, " ") != strings.Join(made, " ") {
		t.Errorf("instances %v, made %v", names, made)
	}
	overlap := mostCreatingAtOnce(t, stream, madeBy)
	t.Logf("at most %d creates of one session under way at once", overlap)
	if overlap < 2 {
		t.Errorf("no session had two creates under way at once (at most %d): creates in one session did not run concurrently", overlap)
	}
	entries, err := os.ReadDir(holding.ReservationsDir(e.home))
	if err != nil {
		t.Fatal(err)
	}
	for _, entry := range entries {
		if entry.Name() != "lock" {
			t.Errorf("reservation %s left behind", entry.Name())
		}
	}
}

// 20 calls from 5 sessions repeating one key at once make one instance;
// a loser is told busy while another live session is still making it, or
// gets the instance (or, once it is made, hears that another live session
// holds it), never unavailable (ISX-159).
func TestOneKeyManySessionsISX159(t *testing.T) {
	e := newEnv(t, buildtest.BusyBox)
	e.writeMCP("templates: [tpl-test-busybox]\n")
	var sessions []*session
	for range 5 {
		sessions = append(sessions, e.start(sessionOptions{}))
	}
	args := map[string]any{"template": "tpl-test-busybox", "idempotency_key": "race:1"}
	var (
		mu    sync.Mutex
		codes = map[string]int{}
		texts = map[string]string{}
		wg    sync.WaitGroup
	)
	for i := range 20 {
		s := sessions[i%5]
		wg.Go(func() {
			res, err := s.cs.CallTool(context.Background(), callParams("create_instance", args))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				codes["error"]++
				texts["error"] = err.Error()
			case res.IsError:
				codes[refusalCode(res)]++
				texts[refusalCode(res)] = resultText(res)
			default:
				codes["ok"]++
			}
		})
	}
	wg.Wait()
	t.Logf("outcomes %v", codes)
	for code, text := range texts {
		if code == string(CodeNotHeld) {
			continue // it was made by then, and another live session holds it
		}
		if code != string(CodeBusy) {
			t.Errorf("%d calls got %s: %s", codes[code], code, text)
		} else if !strings.Contains(text, "another") {
			t.Errorf("busy does not say another session is making it: %s", text)
		}
	}
	if codes["ok"] == 0 {
		t.Error("no call got the instance")
	}
	if names := e.mcpInstances(); len(names) != 1 {
		t.Errorf("instances %v, want exactly one", names)
	}
}

func callParams(tool string, args any) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: tool, Arguments: args}
}

// mostCreatingAtOnce reads lifecycle events until every instance of madeBy
// has started and answers the most instances one session had created and
// not yet started at any one time.
func mostCreatingAtOnce(t *testing.T, stream *incus.EventStream, madeBy map[string]int) int {
	t.Helper()
	creating := map[int]map[string]bool{}
	started, most := 0, 0
	timeout := time.After(2 * time.Minute)
	for started < len(madeBy) {
		var event incus.Event
		select {
		case ev, ok := <-stream.Events:
			if !ok {
				t.Fatalf("the event stream ended: %v", stream.Err())
			}
			event = ev
		case <-timeout:
			t.Fatalf("%d of %d instances seen started", started, len(madeBy))
		}
		life, err := event.Lifecycle()
		if err != nil {
			t.Fatal(err)
		}
		session, ours := madeBy[life.Instance()]
		if !ours {
			continue
		}
		if creating[session] == nil {
			creating[session] = map[string]bool{}
		}
		switch life.Action {
		case "instance-created":
			creating[session][life.Instance()] = true
			most = max(most, len(creating[session]))
		case "instance-started":
			delete(creating[session], life.Instance())
			started++
		}
	}
	return most
}
