package mcpserver

import (
	"context"
	"net/http"
	"strings"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/proxy"
)

// preflight checks, before Claude starts, that the template's claude
// account may use a chosen model (supports_model_preflight), through the
// host proxy as the instance would. A model the API does not know is
// refused; an alias (sonnet, opus, haiku), which only Claude Code
// resolves, is left to it, and so is a check that cannot be made (no
// proxy, an API that does not answer): Claude then reports the model
// error in the task result.
func (s *Server) preflight(ctx context.Context, name, model string) *coded.Error {
	if s.opts.Proxy == nil || !strings.HasPrefix(model, "claude-") {
		return nil
	}
	secret, err := s.opts.Client.PullFile(ctx, name, instance.SecretFile)
	if err != nil {
		return nil
	}
	socket := instance.ProxySocket(s.proxyDir(), s.opts.Client.ProjectName(), name)
	status, err := proxy.ModelStatus(ctx, socket, string(secret), model)
	if err != nil {
		s.warnf("checking model %s for %s: %v", model, name, err)
		return nil
	}
	switch status {
	case http.StatusNotFound, http.StatusForbidden, http.StatusUnauthorized:
		return refusef(CodeInvalidArgument, "model %s is not available to the claude account of %s's template (the Models API answered %d); choose another model (list_templates shows the template's) or leave model out", model, name, status).On(aboutInstance, name)
	}
	return nil
}
