package proxy_test

import (
	"bufio"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/deadline"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/proxy"
	"github.com/incusspawn/isx/internal/isx/proxy/proxytest"
)

// trickle writes one byte of body every 100 ms until the connection
// fails or stop is closed: a client sending a body as slowly as it can.
func trickle(c net.Conn, stop <-chan struct{}) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		if _, err := c.Write([]byte("x")); err != nil {
			return
		}
	}
}

// ended reports how the connection ended, waiting up to a minute: the
// response, if any, and whether the proxy closed it.
func ended(t *testing.T, c net.Conn) (status int, closed bool) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(time.Minute)) //nolint:errcheck // a read that times out fails below
	r := bufio.NewReader(c)
	if resp, err := http.ReadResponse(r, nil); err == nil {
		status = resp.StatusCode
		io.Copy(io.Discard, resp.Body) //nolint:errcheck // what matters is what follows
		resp.Body.Close()
	}
	_, err := r.ReadByte()
	return status, errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || (err != nil && strings.Contains(err.Error(), "reset"))
}

func dialSocket(t *testing.T, socket string) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A slow client cannot hold a connection of the proxy: a body sent a
// byte at a time is cut (408) on an instance's socket and on the control
// socket, a response the client stops reading is given up, and a tunnel
// nothing crosses is closed; another instance is served meanwhile. The
// limits are short here; the defaults are minutes.
func TestSlowClientsCut(t *testing.T) {
	w := newWorld(t, busyboxAccounts)
	downloads, err := proxytest.StartDownloads()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(downloads.Close)
	w.upstream("downloads.isx.test", downloads.URL)
	quiet := startTLS(t, "quiet.isx.test")
	w.upstream("quiet.isx.test", "https://"+quiet.addr)
	opts := w.options(clock.Real{})
	opts.Limits = deadline.Limits{Window: time.Second, Progress: 1 << 10, Write: 2 * time.Second}
	opts.TunnelIdle = 2 * time.Second
	w.start(opts)
	w.branch("slow", busyboxAccounts, instance.NetworkProxyOnly)
	w.branch("good", busyboxAccounts, instance.NetworkProxyOnly)
	socket := instance.ProxySocket(w.proxyDir(), w.client.ProjectName(), "slow")
	secret := w.secret("slow")
	auth := "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("isx:"+secret)) + "\r\n"

	t.Run("body a byte at a time", func(t *testing.T) {
		c := dialSocket(t, socket)
		io.WriteString(c, "POST "+proxy.AnthropicRoute+"/v1/messages HTTP/1.1\r\nHost: x\r\nX-Api-Key: "+secret+"\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{") //nolint:errcheck // the answer tells
		stop := make(chan struct{})
		defer close(stop)
		go trickle(c, stop)
		w.served("good")
		if status, closed := ended(t, c); status != http.StatusRequestTimeout || !closed {
			t.Errorf("a body sent a byte at a time: status %d, closed %t\nlog:\n%s", status, closed, w.logs.String())
		}
	})

	t.Run("response not read", func(t *testing.T) {
		c := dialSocket(t, socket)
		io.WriteString(c, "GET http://downloads.isx.test/pool/big_268435456.deb HTTP/1.1\r\nHost: downloads.isx.test\r\n"+auth+"\r\n") //nolint:errcheck // the proxy's side tells
		w.waitActivity("slow", "the download to be in flight", func(a proxy.Activity) bool { return a.TrafficInFlight == 1 })
		// Nothing reads c: the proxy's writes fill the socket, then stop.
		a := w.waitActivity("slow", "the unread download to be given up", func(a proxy.Activity) bool { return a.TrafficInFlight == 0 })
		if a.TrafficBytesReceived >= 268435456 {
			t.Errorf("the whole download went to a client that read none of it: %+v", a)
		}
		w.served("good")
	})

	t.Run("tunnel nothing crosses", func(t *testing.T) {
		c := dialSocket(t, socket)
		io.WriteString(c, "CONNECT quiet.isx.test:443 HTTP/1.1\r\nHost: quiet.isx.test:443\r\n"+auth+"\r\n") //nolint:errcheck // the answer tells
		c.SetReadDeadline(time.Now().Add(time.Minute))                                                       //nolint:errcheck // a read that times out fails below
		r := bufio.NewReader(c)
		if line, err := r.ReadString('\n'); err != nil || !strings.Contains(line, " 200 ") {
			t.Fatalf("the CONNECT: %q %v", line, err)
		}
		w.waitActivity("slow", "the tunnel to be open", func(a proxy.Activity) bool { return a.TrafficInFlight == 1 })
		for {
			line, err := r.ReadString('\n')
			if err != nil || line == "\r\n" {
				break
			}
		}
		if _, err := r.ReadByte(); !errors.Is(err, io.EOF) {
			t.Errorf("a tunnel nothing crossed was not closed: %v", err)
		}
		w.waitActivity("slow", "the tunnel to be closed", func(a proxy.Activity) bool { return a.TrafficInFlight == 0 })
		if !strings.Contains(w.logs.String(), "closed a tunnel nothing crossed") {
			t.Errorf("the log does not say why:\n%s", w.logs.String())
		}
	})

	t.Run("control socket", func(t *testing.T) {
		c := dialSocket(t, filepath.Join(w.proxyDir(), proxy.ControlSocket))
		io.WriteString(c, "POST /v1/admit/nobody HTTP/1.1\r\nHost: control\r\nContent-Length: 100000\r\n\r\n") //nolint:errcheck // the answer tells
		stop := make(chan struct{})
		defer close(stop)
		go trickle(c, stop)
		if _, closed := ended(t, c); !closed {
			t.Error("the control socket kept a connection whose body came a byte at a time")
		}
	})
	if _, err := os.Stat(socket); err != nil {
		t.Errorf("the instance's socket: %v", err)
	}
}
