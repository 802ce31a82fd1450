package mcpserver

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/proxy"
)

// preflight checks, before Claude starts, that the template's claude
// account may use a chosen model (supports_model_preflight): it asks the
// Models API for it through the host proxy, on the instance's own proxy
// socket with the instance's current secret, exactly as Claude Code in the
// instance would, so the proxy puts in the account's credential. A model
// the API does not know is refused; an alias (sonnet, opus, haiku), which
// only Claude Code resolves, is left to it, and so is a check that cannot
// be made (no proxy, an API that does not answer): Claude then reports the
// model error in the task result.
func (s *Server) preflight(ctx context.Context, name, model string) *coded.Error {
	if s.opts.Proxy == nil || !strings.HasPrefix(model, "claude-") {
		return nil
	}
	secret, err := s.opts.Client.PullFile(ctx, name, instance.SecretFile)
	if err != nil {
		return nil
	}
	socket := instance.ProxySocket(s.proxyDir(), s.opts.Client.ProjectName(), name)
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+instance.ProxyAddress+proxy.AnthropicRoute+"/v1/models/"+url.PathEscape(model), nil)
	if err != nil {
		return nil
	}
	req.Header.Set("x-api-key", strings.TrimSpace(string(secret)))
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := client.Do(req)
	if err != nil {
		s.warnf("checking model %s for %s: %v", model, name, err)
		return nil
	}
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		return nil
	case http.StatusNotFound, http.StatusForbidden, http.StatusUnauthorized:
		return refusef(CodeInvalidArgument, "model %s is not available to the claude account of %s's template (the Models API answered %d); choose another model (list_templates shows the template's) or leave model out", model, name, resp.StatusCode).On(aboutInstance, name)
	}
	return nil
}
