package main

import (
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The command binds, leaves the serving to a detached copy whose pid it
// writes, and exits: once it has, the address relays to the socket.
func TestDetachedRelay(t *testing.T) {
	dir := t.TempDir()
	binary := filepath.Join(dir, "isx-relay")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		t.Fatalf("building: %v\n%s", err, out)
	}
	socket := filepath.Join(dir, "proxy.sock")
	upstream, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer upstream.Close()
	go func() {
		for {
			c, err := upstream.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "greeting from the host\n")
			c.Close()
		}
	}()
	port := freePort(t)
	pidfile := filepath.Join(dir, "relay.pid")
	forward := "127.0.0.1:" + strconv.Itoa(port) + "=" + socket
	if out, err := exec.Command(binary, "-pidfile", pidfile, forward).CombinedOutput(); err != nil {
		t.Fatalf("isx-relay: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatalf("pid file %q: %v", raw, err)
	}
	defer syscall.Kill(pid, syscall.SIGKILL)
	// Field 6 of /proc/PID/stat (after the command's parentheses) is the
	// session.
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if len(fields) < 4 || fields[3] != strconv.Itoa(pid) {
		t.Errorf("the serving relay is not in a session of its own: %s", stat)
	}
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatalf("the address does not accept once the command exited: %v", err)
	}
	got, _ := io.ReadAll(c)
	c.Close()
	if string(got) != "greeting from the host\n" {
		t.Errorf("through the relay: %q", got)
	}
	// A second relay on the taken address fails, saying which.
	out, err := exec.Command(binary, forward).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "binding 127.0.0.1:"+strconv.Itoa(port)) {
		t.Errorf("a second relay: %v, %s", err, out)
	}
	for _, bad := range []string{"", "0.0.0.0:80=/s"} {
		args := []string{}
		if bad != "" {
			args = append(args, bad)
		}
		if out, err := exec.Command(binary, args...).CombinedOutput(); err == nil || !strings.HasPrefix(string(out), "isx-relay: ") {
			t.Errorf("isx-relay %q: %v, %s", bad, err, out)
		}
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
