package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// transports reach upstreams. An upstream config.yaml names is the user's
// choice and reached wherever it is; any other host is reached only at a
// public address, so that an instance cannot use the proxy to reach the
// host's own services or its private network.
type transports struct {
	configured, public *http.Transport
	dialConfigured     *net.Dialer
	dialPublic         *net.Dialer
}

func newTransports(log *slog.Logger) *transports {
	configured := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	public := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: publicOnly}
	base := func(d *net.Dialer) *http.Transport {
		return &http.Transport{
			DialContext:         d.DialContext,
			ForceAttemptHTTP2:   true,
			MaxIdleConns:        256,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     90 * time.Second,
			TLSHandshakeTimeout: 30 * time.Second,
			// Compression is the client's business: the proxy passes
			// bodies as they come.
			DisableCompression: true,
			Proxy:              nil,
		}
	}
	return &transports{configured: base(configured), public: base(public), dialConfigured: configured, dialPublic: public}
}

func (t *transports) forTarget(tg target) *http.Transport {
	if tg.configured {
		return t.configured
	}
	return t.public
}

func (t *transports) dial(ctx context.Context, tg target) (net.Conn, error) {
	d := t.dialPublic
	if tg.configured {
		d = t.dialConfigured
	}
	return d.DialContext(ctx, "tcp", tg.address())
}

func (t *transports) close() {
	t.configured.CloseIdleConnections()
	t.public.CloseIdleConnections()
}

// publicOnly refuses a connection to anything but a public address.
func publicOnly(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return err
	}
	if !isPublic(ip.Unmap()) {
		return fmt.Errorf("%s is not a public address; the proxy lets instances reach only public hosts and the upstreams config.yaml names", ip)
	}
	return nil
}

var sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")

func isPublic(ip netip.Addr) bool {
	return ip.IsGlobalUnicast() && !ip.IsPrivate() && !sharedAddressSpace.Contains(ip)
}
