package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"syscall"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/config"
)

// Control talks to the user's running proxy over its control socket.
type Control struct {
	socket string
	http   *http.Client
}

// Connect returns the control client of home's proxy; it does not dial
// until used.
func Connect(home string) *Control {
	socket := filepath.Join(config.ProxyDir(home), ControlSocket)
	transport := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		DisableKeepAlives: true,
	}
	return &Control{socket: socket, http: &http.Client{Transport: transport}}
}

// Socket is the control socket's path.
func (c *Control) Socket() string { return c.socket }

// Status asks the proxy how it is; a proxy that does not answer is
// CodeNotRunning.
func (c *Control) Status(ctx context.Context) (Status, error) {
	var s Status
	return s, c.do(ctx, http.MethodGet, "/v1/status", &s)
}

// Metrics is the proxy's Prometheus exposition (MetricsPath).
func (c *Control) Metrics(ctx context.Context) ([]byte, error) {
	var raw []byte
	return raw, c.do(ctx, http.MethodGet, MetricsPath, &raw)
}

// Report is the activity of every instance the proxy knows.
func (c *Control) Report(ctx context.Context) (Report, error) {
	var r Report
	return r, c.do(ctx, http.MethodGet, "/v1/activity", &r)
}

// Watch streams the activity of every instance: a Report at once and
// again after each change, until ctx ends or the proxy stops, when the
// channel closes.
func (c *Control) Watch(ctx context.Context) (<-chan Report, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://isx-proxy/v1/activity/watch", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if notRunning(err) {
			return nil, coded.Wrap(CodeNotRunning, err, "the host proxy is not running; isx proxy start starts it")
		}
		return nil, coded.Wrap(CodeControl, err, "cannot reach the host proxy's control socket %s", c.socket)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, coded.New(CodeControl, "the host proxy refused to stream its activity (HTTP %d)", resp.StatusCode)
	}
	reports := make(chan Report)
	go func() {
		defer close(reports)
		defer resp.Body.Close()
		dec := json.NewDecoder(resp.Body)
		for {
			var r Report
			if dec.Decode(&r) != nil {
				return
			}
			select {
			case reports <- r:
			case <-ctx.Done():
				return
			}
		}
	}()
	return reports, nil
}

// Activity is one instance's activity.
func (c *Control) Activity(ctx context.Context, instance string) (Activity, error) {
	var a Activity
	return a, c.do(ctx, http.MethodGet, "/v1/activity/"+url.PathEscape(instance), &a)
}

// Admit has the proxy serve the running instance's current start (its
// secret written, its socket served) before it returns.
func (c *Control) Admit(ctx context.Context, instance string) (Activity, error) {
	var a Activity
	return a, c.do(ctx, http.MethodPost, "/v1/admit/"+url.PathEscape(instance), &a)
}

// Stop asks the proxy to end.
func (c *Control) Stop(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, "/v1/stop", nil)
}

// Close drops idle connections.
func (c *Control) Close() { c.http.CloseIdleConnections() }

func (c *Control) do(ctx context.Context, method, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://isx-proxy"+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if notRunning(err) {
			return coded.Wrap(CodeNotRunning, err, "the isx host proxy is not running (no answer on %s); `isx proxy start` starts it", c.socket)
		}
		return coded.Wrap(CodeControl, err, "the isx host proxy did not answer on %s", c.socket)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return coded.Wrap(CodeControl, err, "reading the isx host proxy's answer")
	}
	if resp.StatusCode >= 300 {
		var refusal controlError
		if json.Unmarshal(data, &refusal) == nil && refusal.Code != "" {
			return coded.New(refusal.Code, "%s", refusal.Message)
		}
		return coded.New(CodeControl, "the isx host proxy answered %s: %s", resp.Status, data)
	}
	if out == nil {
		return nil
	}
	if raw, ok := out.(*[]byte); ok {
		*raw = data
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return coded.Wrap(CodeControl, err, "the isx host proxy's answer is not what isx expects (a proxy of another isx version?); `isx proxy restart`")
	}
	return nil
}

// notRunning recognises a socket nobody listens on.
func notRunning(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)
}

// IsNotRunning reports whether err says no proxy runs.
func IsNotRunning(err error) bool { return coded.CodeOf(err) == CodeNotRunning }
