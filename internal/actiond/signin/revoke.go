package signin

import (
	"errors"
	"net/http"
	"strings"

	"github.com/incusspawn/isx/internal/actiond/store"
)

// revoke is RFC 7009 revocation. A refresh token ends its whole sign-in:
// none of the grant's refresh tokens works again. Access tokens are
// short-lived JWTs that are not looked up on use, so they cannot be revoked
// before they expire; the endpoint says so rather than pretend.
func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	if !s.readForm(w, r) {
		return
	}
	client, err := s.authenticateClient(r)
	if !s.clientOK(w, err) {
		return
	}
	token := r.PostForm.Get("token")
	if token == "" {
		writeError(w, http.StatusBadRequest, "invalid_request", "token is required.")
		return
	}
	if strings.Count(token, ".") == 2 {
		writeError(w, http.StatusBadRequest, "unsupported_token_type",
			"Access tokens cannot be revoked; they expire within "+s.opts.AccessTTL.String()+". Revoke the refresh token to end the sign-in.")
		return
	}
	g, err := s.opts.Store.RefreshGrant(r.Context(), hash(token))
	switch {
	case errors.Is(err, store.ErrNotFound):
		// RFC 7009 §2.2: an unknown token is not an error.
		w.WriteHeader(http.StatusOK)
		return
	case err != nil:
		s.serverError(w, "revoke the token", err)
		return
	case g.ClientID != client.id:
		writeError(w, http.StatusBadRequest, "invalid_grant", "The token was issued to another client.")
		return
	}
	if err := s.opts.Store.RevokeGrant(r.Context(), g.ID); err != nil {
		s.serverError(w, "revoke the token", err)
		return
	}
	s.opts.Logger.Info("sign-in: revoked", "client_id", client.id, "subject", g.Subject)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
}
