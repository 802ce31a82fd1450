package relay

import (
	"bufio"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	good, err := Parse("127.0.0.1:3128=/opt/isx/proxy/proxy.sock")
	if err != nil || good.Port != 3128 || good.Socket != "/opt/isx/proxy/proxy.sock" {
		t.Fatalf("Parse = %+v, %v", good, err)
	}
	if good.String() != "127.0.0.1:3128=/opt/isx/proxy/proxy.sock" {
		t.Errorf("String = %q", good.String())
	}
	for arg, want := range map[string]string{
		"127.0.0.1:3128":                            "is not ADDRESS=SOCKET",
		"0.0.0.0:3128=/s":                           "listens on 127.0.0.1 only",
		"127.0.0.1:0=/s":                            "no port",
		"127.0.0.1:70000=/s":                        "no port",
		"127.0.0.1:80=relative.sock":                "absolute path",
		"127.0.0.1:80=/" + strings.Repeat("x", 107): "at most 107",
	} {
		if _, err := Parse(arg); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error saying %q", arg, err, want)
		}
	}
}

// echo serves a unix socket that answers each line with "echo: " and
// the line, then reports the half-close it saw.
func echo(t *testing.T) string {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "s")
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				in := bufio.NewScanner(c)
				for in.Scan() {
					io.WriteString(c, "echo: "+in.Text()+"\n")
				}
				io.WriteString(c, "closed\n")
			}()
		}
	}()
	return socket
}

func TestServeRelaysBothWaysAndHalfCloses(t *testing.T) {
	socket := echo(t)
	forward := Forward{Port: freePort(t), Socket: socket}
	l, err := Listen(forward)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- Serve(l, socket) }()
	c, err := net.Dial("tcp", "127.0.0.1:"+itoa(forward.Port))
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "one\ntwo\n")
	c.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(c)
	c.Close()
	if err != nil || string(got) != "echo: one\necho: two\nclosed\n" {
		t.Fatalf("through the relay: %q, %v", got, err)
	}
	l.Close()
	if err := <-served; err == nil {
		t.Error("Serve returned nil after its listener closed")
	}
}

func TestServeClosesWhenTheSocketDoesNotAnswer(t *testing.T) {
	forward := Forward{Port: freePort(t), Socket: filepath.Join(t.TempDir(), "nobody")}
	l, err := Listen(forward)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go Serve(l, forward.Socket)
	c, err := net.Dial("tcp", "127.0.0.1:"+itoa(forward.Port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("read %d bytes, %v; want the connection closed", n, err)
	}
}

func TestListenRefusesATakenAddress(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port
	if _, err := Listen(Forward{Port: port, Socket: "/s"}); err == nil || !strings.Contains(err.Error(), "binding 127.0.0.1:"+itoa(port)) {
		t.Fatalf("Listen on a taken port: %v", err)
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

func itoa(n int) string { return strconv.Itoa(n) }
