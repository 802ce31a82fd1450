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

// Report is the activity of every instance the proxy knows.
func (c *Control) Report(ctx context.Context) (Report, error) {
	var r Report
	return r, c.do(ctx, http.MethodGet, "/v1/activity", &r)
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
