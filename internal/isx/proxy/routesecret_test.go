package proxy_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/proxy"
)

// routeClient reaches the host routes as the instance's HTTPS_PROXY
// client does, from the host: CONNECT on the instance's own socket with
// its secret as the proxy password, then TLS trusting the proxy's CA.
func (w *world) routeClient(name string) *http.Client {
	w.t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(readFile(w.t, filepath.Join(w.proxyDir(), "ca.pem")))) {
		w.t.Fatal("the proxy's CA is not PEM")
	}
	socket := instance.ProxySocket(w.proxyDir(), w.client.ProjectName(), name)
	proxyURL := &url.URL{Scheme: "http", User: url.UserPassword("isx", w.secret(name)), Host: "isx-proxy"}
	return &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		Proxy: http.ProxyURL(proxyURL),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
	}}
}

// A route's secret file is opened once and the open file checked: while
// it is replaced, again and again, by turns with a private file and one
// anyone may read, requests are either served with the private file's
// secret or refused (503); the controller never gets the other's.
func TestRouteSecretReadsTheFileItChecked(t *testing.T) {
	w := newRouteWorld(t)
	w.branch("agent", busyboxAccounts, instance.NetworkProxyOnly)
	client := w.routeClient("agent")
	secret := w.secret("agent")
	get := func() int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "https://work.isx.internal/ping", nil)
		req.Header.Set(proxy.SecretHeader, secret)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body) //nolint:errcheck // the status is what counts
		resp.Body.Close()
		return resp.StatusCode
	}
	if status := get(); status != http.StatusOK {
		t.Fatalf("the first call: %d\n%s", status, w.logs.String())
	}
	path := config.RouteSecretPath(w.home, "work.isx.internal")
	private := w.secretFile("work.isx.internal")
	dir := filepath.Dir(path)
	privateFile, openFile := filepath.Join(dir, "private"), filepath.Join(dir, "open")
	if err := os.Link(path, privateFile); err != nil {
		t.Fatal(err)
	}
	const readable = "0123456789abcdef-anyone-may-read-this-one"
	if err := os.WriteFile(openFile, []byte(readable+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stop, swapped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(swapped)
		tmp := filepath.Join(dir, "swap")
		for {
			for _, from := range []string{privateFile, openFile} {
				select {
				case <-stop:
					return
				default:
				}
				os.Remove(tmp)
				if err := os.Link(from, tmp); err != nil {
					t.Error(err)
					return
				}
				if err := os.Rename(tmp, path); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	served, refused := 0, 0
	for range 3000 {
		switch status := get(); status {
		case http.StatusOK:
			served++
		case http.StatusServiceUnavailable:
			refused++
		default:
			t.Fatalf("a request was answered %d", status)
		}
	}
	close(stop)
	<-swapped
	for _, seen := range w.work.requests() {
		if got := seen.Header.Get(proxy.RouteSecretHeader); got != private {
			t.Fatalf("the controller got %q as the route secret, not the private file's", got)
		}
	}
	if served == 0 || refused == 0 {
		t.Errorf("the requests did not meet both files: %d served, %d refused", served, refused)
	}
	t.Logf("%d served, %d refused", served, refused)
}
