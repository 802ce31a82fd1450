package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/incustest"
)

// screen is the isx binary on a terminal: a tmux session on a tmux server
// of the test's own, driven with send-keys and read with capture-pane, as
// a person at a terminal would use it.
type screen struct {
	t      *testing.T
	socket string
	status string // the file the launcher writes isx's exit status to
}

// screenTimeout bounds waiting for what a key or a change brings about.
const screenTimeout = 30 * time.Second

// startScreen runs isx with args in a width×height terminal, in x's home
// and environment plus env (NAME=value).
func startScreen(t *testing.T, x *cli, width, height int, env []string, args ...string) *screen {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatalf("the TUI tests need tmux (apt-get install tmux): %v", err)
	}
	dir := t.TempDir()
	s := &screen{t: t, socket: filepath.Join(dir, "tmux.sock")}
	vars := append(append(x.baseEnv(), x.env...), "TERM=xterm-256color")
	vars = append(vars, env...)
	// The shell stays isx's parent and writes its exit status down:
	// under load tmux has been seen to leave an exited isx a zombie for
	// longer than screenTimeout without marking its pane dead.
	s.status = filepath.Join(dir, "status")
	script := "#!/bin/sh\nenv -i"
	for _, kv := range vars {
		script += " " + shellWord(kv)
	}
	script += " " + shellWord(isxBinary)
	for _, arg := range args {
		script += " " + shellWord(arg)
	}
	script += "\necho $? > " + shellWord(s.status+".new") + " && mv " + shellWord(s.status+".new") + " " + shellWord(s.status)
	launcher := filepath.Join(dir, "isx.sh")
	if err := os.WriteFile(launcher, []byte(script+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	s.tmux("-f", "/dev/null", "new-session", "-d", "-s", "isx", "-x", fmt.Sprint(width), "-y", fmt.Sprint(height), launcher)
	t.Cleanup(func() {
		// The server may be gone already with its last session.
		_ = exec.Command("tmux", "-S", s.socket, "kill-server").Run()
	})
	s.tmux("set-option", "-t", "isx", "remain-on-exit", "on")
	s.tmux("set-option", "-s", "set-clipboard", "on")
	return s
}

func shellWord(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func (s *screen) tmux(args ...string) string {
	s.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", s.socket}, args...)...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// text is what the screen shows now, without colours.
func (s *screen) text() string { return s.tmux("capture-pane", "-p", "-t", "isx") }

// escapes is the screen with its colour and attribute sequences.
func (s *screen) escapes() string { return s.tmux("capture-pane", "-p", "-e", "-t", "isx") }

// keys presses keys by tmux's names (Enter, Escape, F3, Down) or types
// text with literal.
func (s *screen) keys(keys ...string) { s.tmux(append([]string{"send-keys", "-t", "isx"}, keys...)...) }

func (s *screen) typed(text string) { s.tmux("send-keys", "-t", "isx", "-l", text) }

// resize changes the terminal's size and waits until isx has drawn the
// screen anew for it (its title bar spans the width).
func (s *screen) resize(width, height int) {
	s.t.Helper()
	s.tmux("resize-window", "-t", "isx", "-x", fmt.Sprint(width), "-y", fmt.Sprint(height))
	s.waitFor(fmt.Sprintf("the screen drawn %d wide", width), screenTimeout, func(text string) bool {
		title, _, _ := strings.Cut(text, "\n")
		return len([]rune(title)) >= width-1
	})
}

// waitFor waits until the screen satisfies cond, failing the test with the
// screen it last saw after timeout.
func (s *screen) waitFor(what string, timeout time.Duration, cond func(text string) bool) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last string
	err := incustest.Poll(ctx, 10*time.Millisecond, func() bool {
		last = s.text()
		return cond(last)
	})
	if err != nil {
		s.t.Fatalf("the screen did not show %s within %s; it shows:\n%s", what, timeout, last)
	}
	return last
}

// expect waits until the screen shows every one of wants.
func (s *screen) expect(wants ...string) string {
	s.t.Helper()
	return s.waitFor(fmt.Sprintf("%q", wants), screenTimeout, func(text string) bool {
		for _, want := range wants {
			if !strings.Contains(text, want) {
				return false
			}
		}
		return true
	})
}

// gone waits until the screen no longer shows unwanted.
func (s *screen) gone(unwanted string) string {
	s.t.Helper()
	return s.waitFor(fmt.Sprintf("no %q", unwanted), screenTimeout, func(text string) bool {
		return !strings.Contains(text, unwanted)
	})
}

// exited waits for the program to end and returns its exit status.
func (s *screen) exited() string {
	s.t.Helper()
	var status string
	ctx, cancel := context.WithTimeout(context.Background(), screenTimeout)
	defer cancel()
	err := incustest.Poll(ctx, 20*time.Millisecond, func() bool {
		written, err := os.ReadFile(s.status)
		status = strings.TrimSpace(string(written))
		return err == nil
	})
	if err != nil {
		s.t.Fatalf("isx did not exit; its goroutines, dumped by SIGQUIT:\n%s", s.dump())
	}
	return status
}

// dump makes a stuck isx print its goroutines (SIGQUIT) and returns the
// pane with its history once isx has ended.
func (s *screen) dump() string {
	s.t.Helper()
	pid := strings.TrimSpace(s.tmux("display-message", "-p", "-t", "isx", "#{pane_pid}"))
	// The pane runs the launcher's shell; isx is its child.
	if children, err := os.ReadFile("/proc/" + pid + "/task/" + pid + "/children"); err == nil && len(strings.Fields(string(children))) > 0 {
		pid = strings.Fields(string(children))[0]
	}
	tty := strings.TrimSpace(s.tmux("display-message", "-p", "-t", "isx", "#{pane_tty}"))
	var facts strings.Builder
	for _, f := range []string{"wchan", "stat", "status"} {
		data, _ := os.ReadFile("/proc/" + pid + "/" + f)
		fmt.Fprintf(&facts, "/proc/%s/%s: %s\n", pid, f, data)
	}
	threads, _ := filepath.Glob("/proc/" + pid + "/task/*/wchan")
	for _, t := range threads {
		data, _ := os.ReadFile(t)
		fmt.Fprintf(&facts, "%s: %s\n", t, data)
	}
	out, _ := exec.Command("stty", "-a", "-F", tty).CombinedOutput()
	fmt.Fprintf(&facts, "stty %s: %s\n", tty, out)
	s.t.Log(facts.String())
	if err := exec.Command("kill", "-QUIT", pid).Run(); err != nil {
		return "kill -QUIT " + pid + ": " + err.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), screenTimeout)
	defer cancel()
	_ = incustest.Poll(ctx, 20*time.Millisecond, func() bool {
		_, err := os.Stat(s.status)
		return err == nil
	})
	return s.tmux("capture-pane", "-p", "-S", "-5000", "-t", "isx")
}

// selectedRow is the line the cursor marks, without the marker.
func selectedRow(text string) string {
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, "> "); ok {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}

// relay is a unix socket that forwards to the Incus socket, which the test
// closes and opens again: Incus going away and coming back for the isx it
// serves, and for nobody else on the shared daemon.
type relay struct {
	t      *testing.T
	path   string
	target string

	mu       sync.Mutex
	listener net.Listener
	conns    map[net.Conn]bool
	wg       sync.WaitGroup
}

func startRelay(t *testing.T, target string) *relay {
	r := &relay{t: t, path: filepath.Join(t.TempDir(), "incus.sock"), target: target, conns: map[net.Conn]bool{}}
	r.open()
	t.Cleanup(r.close)
	return r
}

func (r *relay) open() {
	r.t.Helper()
	listener, err := net.Listen("unix", r.path)
	if err != nil {
		r.t.Fatal(err)
	}
	r.mu.Lock()
	r.listener = listener
	r.mu.Unlock()
	r.wg.Go(func() {
		for {
			conn, err := listener.Accept()
			if err != nil {
				return
			}
			r.forward(conn)
		}
	})
}

func (r *relay) forward(conn net.Conn) {
	upstream, err := net.Dial("unix", r.target)
	if err != nil {
		conn.Close()
		return
	}
	r.mu.Lock()
	r.conns[conn], r.conns[upstream] = true, true
	r.mu.Unlock()
	pipe := func(to, from net.Conn) {
		_, _ = io.Copy(to, from)
		to.Close()
		from.Close()
	}
	r.wg.Go(func() { pipe(upstream, conn) })
	r.wg.Go(func() { pipe(conn, upstream) })
}

// close stops listening (the socket file goes) and cuts every connection.
func (r *relay) close() {
	r.mu.Lock()
	if r.listener != nil {
		r.listener.Close()
		r.listener = nil
	}
	for conn := range r.conns {
		conn.Close()
	}
	r.conns = map[net.Conn]bool{}
	r.mu.Unlock()
	r.wg.Wait()
}
