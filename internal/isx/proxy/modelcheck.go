package proxy

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/incusspawn/isx/internal/isx/instance"
)

// ModelStatus asks the Models API for model through an instance's own
// proxy socket with the instance's secret, exactly as Claude Code in the
// instance would, so the proxy puts in the account's credential; it
// returns the status the API answered.
func ModelStatus(ctx context.Context, socket, secret, model string) (int, error) {
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+instance.ProxyAddress+AnthropicRoute+"/v1/models/"+url.PathEscape(model), nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("x-api-key", strings.TrimSpace(secret))
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
