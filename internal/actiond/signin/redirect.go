package signin

import (
	"fmt"
	"net/url"
	"strings"
)

// Redirect URIs are loopback http URIs (RFC 8252 §7.3): a code is only ever
// sent back to this machine, where the host that asked for it listens. At
// authorization the port may differ from the registered one, since a native
// host takes whatever port is free; everything else must match exactly.

// maxRedirectURIs bounds a registration.
const maxRedirectURIs = 10

// checkRedirectURI says what is wrong with a redirect URI a client
// registers, or nil.
func checkRedirectURI(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Errorf("redirect URI %q is not a URI", raw)
	case u.Scheme != "http":
		return fmt.Errorf("redirect URI %q must be an http URI on this machine's loopback (http://127.0.0.1:PORT/..., http://[::1]:PORT/... or http://localhost:PORT/...)", raw)
	case !loopbackHost(u.Hostname()):
		return fmt.Errorf("redirect URI %q is not on loopback: the sign-in sends codes only back to this machine", raw)
	case u.User != nil:
		return fmt.Errorf("redirect URI %q must not carry user information", raw)
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return fmt.Errorf("redirect URI %q must not have a fragment", raw)
	}
	return nil
}

// matchRedirectURI finds the registered URI the requested one stands for:
// equal, or equal but for the port.
func matchRedirectURI(registered []string, requested string) bool {
	r, err := url.Parse(requested)
	if err != nil || checkRedirectURI(requested) != nil {
		return false
	}
	for _, candidate := range registered {
		if candidate == requested {
			return true
		}
		c, err := url.Parse(candidate)
		if err != nil {
			continue
		}
		if c.Scheme == r.Scheme && strings.EqualFold(c.Hostname(), r.Hostname()) && c.EscapedPath() == r.EscapedPath() && c.RawQuery == r.RawQuery {
			return true
		}
	}
	return false
}

// withParams is the redirect URI with the response's parameters added to
// its query.
func withParams(redirectURI string, params url.Values) string {
	u, err := url.Parse(redirectURI)
	if err != nil {
		return redirectURI
	}
	query := u.Query()
	for k, vs := range params {
		for _, v := range vs {
			query.Add(k, v)
		}
	}
	u.RawQuery = query.Encode()
	return u.String()
}
