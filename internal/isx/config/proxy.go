package config

import (
	"net/url"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/incusspawn/isx/internal/isx/yamltree"
)

// Upstream is where the host proxy sends the requests an instance makes
// to one host: config.yaml's
//
//	proxy:
//	  upstreams:
//	    api.anthropic.com: http://127.0.0.1:9001
//
// A mirror, a company gateway or a local fake of a provider stands in for
// the real host this way; the instance still addresses the real name.
type Upstream struct {
	// Host is the name (and port, when not the scheme's) the instance
	// addresses, lowercased.
	Host string
	// URL is the base URL the proxy sends to: scheme, host and port, and
	// a path prefix when there is one.
	URL  *url.URL
	Line int
}

var (
	proxyKeys    = []string{"upstreams"}
	hostPattern  = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*(:[0-9]{1,5})?$`)
	schemeByPort = map[string]string{"http": "80", "https": "443"}
)

// proxy reads the proxy: section.
func (r *nodeReader) proxy(n *yaml.Node, key string) (map[string]Upstream, error) {
	upstreams := map[string]Upstream{}
	err := r.Mapping(n, key, proxyKeys, func(name string, _, v *yaml.Node) error {
		field := yamltree.Join(key, name)
		return r.Mapping(v, field, nil, func(host string, hk, hv *yaml.Node) error {
			u, err := r.upstream(host, hk, hv, yamltree.Join(field, host))
			if err == nil {
				upstreams[u.Host] = u
			}
			return err
		})
	})
	if err != nil || len(upstreams) == 0 {
		return nil, err
	}
	return upstreams, nil
}

func (r *nodeReader) upstream(host string, k, v *yaml.Node, field string) (Upstream, error) {
	host = strings.ToLower(host)
	if len(host) > 253 || !hostPattern.MatchString(host) {
		return Upstream{}, invalidf(r.File, k.Line, field, "%q is not a host name (like api.anthropic.com, or registry.example:8443)", host)
	}
	raw, err := r.text(v, field)
	if err != nil {
		return Upstream{}, err
	}
	u, err := url.Parse(raw)
	bad := func(why string) (Upstream, error) {
		return Upstream{}, invalidf(r.File, v.Line, field, "%q %s; give a base URL like http://127.0.0.1:9001 or https://mirror.example/prefix", raw, why)
	}
	switch {
	case err != nil:
		return bad("is not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return bad("must start with http:// or https://")
	case u.Host == "" || u.User != nil:
		return bad("must name a host, without a user or password")
	case u.RawQuery != "" || u.Fragment != "":
		return bad("must not have a query or fragment")
	}
	if u.Port() == "" {
		u.Host += ":" + schemeByPort[u.Scheme]
	}
	u.Path = strings.TrimRight(u.Path, "/")
	return Upstream{Host: host, URL: u, Line: k.Line}, nil
}
