package signin

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/coded"
)

// A client whose client_id is an https URL is described by the document
// at that URL (Client ID Metadata Documents, SEP-991) instead of by a
// registration: the host publishes its metadata once, and every
// authorization server reads it from there. The document is fetched when
// a request names the client, under bounds that keep a hostile client_id
// from turning actiond into a probe of its own network: a short timeout, a
// small body, no redirects, no proxy, and a check of the address actually
// dialled (not the name, which could be rebound between lookup and
// connect).

// Bounds of a fetch, and of what is kept.
const (
	// DefaultDocumentTimeout bounds a whole fetch, connect to last byte.
	DefaultDocumentTimeout = 5 * time.Second
	// MaxDocumentBytes is the largest document read; SEP-991 suggests
	// authorization servers keep to a few kilobytes.
	MaxDocumentBytes = 5 << 10
	// maxDocumentFreshness caps what a document's caching headers may ask.
	maxDocumentFreshness = 24 * time.Hour
	// maxCachedDocuments bounds the cache; beyond it, stale entries go
	// first, then any.
	maxCachedDocuments = 256
	// maxClientIDLength bounds a client_id URL.
	maxClientIDLength = 2048
)

// Codes of the errors a document can fail with.
const (
	CodeDocumentURL     = "client_document_url"
	CodeDocumentAddress = "client_document_address"
	CodeDocumentFetch   = "client_document_fetch"
	CodeDocumentInvalid = "client_document_invalid"
)

// DocumentOptions configure how client metadata documents are fetched.
type DocumentOptions struct {
	// Off refuses them: the metadata does not offer them, and an https
	// client_id is a client no one registered.
	Off bool
	// Roots verify the documents' servers; nil is the system's roots (which
	// SSL_CERT_FILE and SSL_CERT_DIR change).
	Roots *x509.CertPool
	// Loopback allows documents served from this machine's loopback
	// addresses: only for the local environment, where the host and actiond
	// share the machine.
	Loopback bool
	Timeout  time.Duration // default DefaultDocumentTimeout
	Clock    clock.Clock
}

// documents fetches and caches client metadata documents.
type documents struct {
	off      bool
	http     *http.Client
	loopback bool
	clock    clock.Clock
	mu       sync.Mutex
	cache    map[string]cachedDocument
}

type cachedDocument struct {
	client  Client
	expires time.Time
}

func newDocuments(opts DocumentOptions) *documents {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultDocumentTimeout
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	d := &documents{off: opts.Off, loopback: opts.Loopback, clock: opts.Clock, cache: map[string]cachedDocument{}}
	dialer := &net.Dialer{Timeout: opts.Timeout, Control: d.checkDial}
	transport := &http.Transport{
		Proxy:               nil, // a proxy would dial for us, past checkDial
		DialContext:         dialer.DialContext,
		TLSClientConfig:     &tls.Config{RootCAs: opts.Roots, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: opts.Timeout,
		// Fetches are rare (documents are cached) and an idle connection
		// would outlive the server.
		DisableKeepAlives: true,
		ForceAttemptHTTP2: true,
	}
	d.http = &http.Client{
		Transport: transport,
		Timeout:   opts.Timeout,
		// The document is at the client_id itself; a redirect would make it
		// someone else's.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return d
}

// isDocumentID says whether a client_id names a metadata document rather
// than a registration (whose IDs are base64url, without a colon).
func isDocumentID(id string) bool { return strings.HasPrefix(id, "https:") }

// checkDocumentURL checks a client_id URL as SEP-991 asks: https, a host,
// a path other than "/", no fragment, no user information, no dot
// segments.
func checkDocumentURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case len(raw) > maxClientIDLength:
		return nil, coded.New(CodeDocumentURL, "the client_id URL is longer than %d characters", maxClientIDLength)
	case err != nil:
		return nil, coded.New(CodeDocumentURL, "the client_id %q is not a URL", raw)
	case u.Scheme != "https" || u.Host == "" || u.Opaque != "":
		return nil, coded.New(CodeDocumentURL, "the client_id %q must be an https URL with a host", raw)
	case u.User != nil:
		return nil, coded.New(CodeDocumentURL, "the client_id %q must not carry user information", raw)
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return nil, coded.New(CodeDocumentURL, "the client_id %q must not have a fragment", raw)
	case u.Path == "" || u.Path == "/":
		return nil, coded.New(CodeDocumentURL, "the client_id %q must have a path: the document's, not the site's root", raw)
	}
	for _, segment := range strings.Split(u.EscapedPath(), "/") {
		if segment == "." || segment == ".." || strings.EqualFold(segment, "%2e") || strings.EqualFold(segment, "%2e%2e") {
			return nil, coded.New(CodeDocumentURL, "the client_id %q must not have . or .. segments", raw)
		}
	}
	return u, nil
}

// checkDial refuses to connect to an address that is not a public one:
// private, link-local, multicast, unspecified and the like always, and
// loopback unless allowed.
func (d *documents) checkDial(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return coded.Wrap(CodeDocumentAddress, err, "cannot read the address %s", address)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return coded.Wrap(CodeDocumentAddress, err, "cannot read the address %s", address)
	}
	if reason := refusedAddress(ip.Unmap(), d.loopback); reason != "" {
		return coded.New(CodeDocumentAddress, "the client document's server is at %s, a %s address, which actiond does not fetch from", ip, reason)
	}
	return nil
}

// notGlobal are the ranges, besides those netip names, that no public
// server lives in (IANA special-purpose registries).
var notGlobal = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("100::/64"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("2002::/16"),
}

// refusedAddress names what kind of address ip is when it is refused, or
// is empty.
func refusedAddress(ip netip.Addr, loopback bool) string {
	switch {
	case ip.IsLoopback():
		if loopback {
			return ""
		}
		return "loopback"
	case ip.IsPrivate():
		return "private"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "link-local"
	case ip.IsUnspecified():
		return "unspecified"
	case ip.IsMulticast(), ip.IsInterfaceLocalMulticast():
		return "multicast"
	}
	for _, p := range notGlobal {
		if p.Contains(ip) {
			return "reserved"
		}
	}
	return ""
}

// client returns the client a document describes, from the cache while it
// is fresh.
func (d *documents) lookup(ctx context.Context, id string) (Client, error) {
	now := d.clock.Now()
	d.mu.Lock()
	cached, ok := d.cache[id]
	d.mu.Unlock()
	if ok && now.Before(cached.expires) {
		return cached.client, nil
	}
	u, err := checkDocumentURL(id)
	if err != nil {
		return Client{}, err
	}
	c, freshFor, err := d.fetch(ctx, u)
	if err != nil {
		return Client{}, err
	}
	d.keep(id, c, now, freshFor)
	return c, nil
}

func (d *documents) fetch(ctx context.Context, u *url.URL) (Client, time.Duration, error) {
	id := u.String()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, id, nil)
	if err != nil {
		return Client{}, 0, coded.Wrap(CodeDocumentURL, err, "the client_id %q cannot be fetched", id)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := d.http.Do(req)
	if err != nil {
		var refused *coded.Error
		if errors.As(err, &refused) && refused.Code == CodeDocumentAddress {
			return Client{}, 0, refused
		}
		return Client{}, 0, coded.Wrap(CodeDocumentFetch, err, "cannot fetch the client's metadata document %s", id)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Client{}, 0, coded.New(CodeDocumentFetch, "the client's metadata document %s answered %s, not 200 OK", id, resp.Status)
	}
	if media := resp.Header.Get("Content-Type"); media != "" && !strings.HasPrefix(strings.ToLower(media), "application/json") && !strings.Contains(strings.ToLower(media), "+json") {
		return Client{}, 0, coded.New(CodeDocumentInvalid, "the client's metadata document %s is %s, not JSON", id, media)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxDocumentBytes+1))
	if err != nil {
		return Client{}, 0, coded.Wrap(CodeDocumentFetch, err, "cannot read the client's metadata document %s", id)
	}
	if len(body) > MaxDocumentBytes {
		return Client{}, 0, coded.New(CodeDocumentInvalid, "the client's metadata document %s is larger than %d bytes", id, MaxDocumentBytes)
	}
	c, err := parseDocument(id, body)
	if err != nil {
		return Client{}, 0, err
	}
	return c, freshness(resp.Header, d.clock.Now()), nil
}

// parseDocument checks a document as a registration is checked, and as
// SEP-991 adds: it names itself, and its client has no secret.
func parseDocument(id string, body []byte) (Client, error) {
	var document struct {
		ClientID                string  `json:"client_id"`
		TokenEndpointAuthMethod *string `json:"token_endpoint_auth_method"`
		ClientSecret            *string `json:"client_secret"`
	}
	if err := json.Unmarshal(body, &document); err != nil {
		return Client{}, coded.Wrap(CodeDocumentInvalid, err, "the client's metadata document %s is not a JSON object", id)
	}
	switch {
	case document.ClientID != id:
		return Client{}, coded.New(CodeDocumentInvalid, "the metadata document at %s names the client %q: a document must name its own URL as client_id", id, document.ClientID)
	case document.ClientSecret != nil:
		return Client{}, coded.New(CodeDocumentInvalid, "the metadata document at %s holds a client_secret: a public document cannot keep a secret", id)
	}
	// A client no one shared a secret with can only be a public one; an
	// absent method means that, not RFC 7591's client_secret_basic.
	if document.TokenEndpointAuthMethod != nil && *document.TokenEndpointAuthMethod != authNone {
		return Client{}, coded.New(CodeDocumentInvalid, "the metadata document at %s asks for token_endpoint_auth_method %q; a document's client authenticates with none", id, *document.TokenEndpointAuthMethod)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return Client{}, coded.Wrap(CodeDocumentInvalid, err, "the client's metadata document %s is not a JSON object", id)
	}
	fields["token_endpoint_auth_method"] = json.RawMessage(strconv.Quote(authNone))
	delete(fields, "client_id")
	normalised, err := json.Marshal(fields)
	if err != nil {
		return Client{}, coded.Wrap(CodeDocumentInvalid, err, "the client's metadata document %s cannot be read", id)
	}
	c, _, err := parseClient(normalised)
	if err != nil {
		return Client{}, coded.Wrap(CodeDocumentInvalid, err, "the client's metadata document %s", id)
	}
	return c, nil
}

// freshness is how long a response may be reused, as HTTP caching (RFC
// 9111 §4.2) says for a private cache: not at all under no-store or
// no-cache, else max-age, else Expires against Date, else a tenth of the
// time since Last-Modified; capped at a day.
func freshness(h http.Header, now time.Time) time.Duration {
	var maxAge time.Duration
	explicit := false
	for _, directive := range strings.Split(strings.ToLower(strings.Join(h.Values("Cache-Control"), ",")), ",") {
		name, value, _ := strings.Cut(strings.TrimSpace(directive), "=")
		switch name {
		case "no-store", "no-cache":
			return 0
		case "max-age":
			seconds, err := strconv.ParseInt(strings.Trim(value, `"`), 10, 64)
			if err != nil || seconds < 0 {
				return 0
			}
			maxAge, explicit = time.Duration(min(seconds, int64(maxDocumentFreshness/time.Second)))*time.Second, true
		}
	}
	date := now
	if d, err := http.ParseTime(h.Get("Date")); err == nil {
		date = d
	}
	if !explicit {
		if expires := h.Get("Expires"); expires != "" {
			at, err := http.ParseTime(expires)
			if err != nil {
				return 0 // an invalid Expires means already expired
			}
			maxAge, explicit = at.Sub(date), true
		}
	}
	if !explicit {
		if modified, err := http.ParseTime(h.Get("Last-Modified")); err == nil && modified.Before(date) {
			maxAge = date.Sub(modified) / 10
		}
	}
	if age, err := strconv.ParseInt(h.Get("Age"), 10, 64); err == nil && age > 0 {
		maxAge -= time.Duration(age) * time.Second
	}
	return max(0, min(maxAge, maxDocumentFreshness))
}

func (d *documents) keep(id string, c Client, now time.Time, freshFor time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if freshFor <= 0 {
		delete(d.cache, id)
		return
	}
	if len(d.cache) >= maxCachedDocuments {
		for key, entry := range d.cache {
			if !now.Before(entry.expires) {
				delete(d.cache, key)
			}
		}
		for key := range d.cache {
			if len(d.cache) < maxCachedDocuments {
				break
			}
			delete(d.cache, key)
		}
	}
	d.cache[id] = cachedDocument{client: c, expires: now.Add(freshFor)}
}

// documentClient is the client a client_id URL names, as the endpoints see
// it.
func (s *Server) documentClient(ctx context.Context, id string) (*registered, error) {
	c, err := s.documents.lookup(ctx, id)
	if err != nil {
		s.opts.Logger.Warn("sign-in: a client's metadata document is refused", "client_id", id, "err", err)
		return nil, unusableDocument(err)
	}
	return &registered{id: id, document: true, Client: c}, nil
}

// documentError is a client_id URL whose document cannot be used; its
// message is what the client and the person are told, its code the
// fetch's (CodeDocumentInvalid where the fetch had none).
type documentError struct{ coded.Base }

func unusableDocument(err error) *documentError {
	code := coded.CodeOf(err)
	if code == "" {
		code = CodeDocumentInvalid
	}
	return &documentError{coded.Base{Code: code, Err: err,
		Message: fmt.Sprintf("The client's metadata document cannot be used: %v.", err)}}
}

// Error is the message alone, which tells the cause already.
func (e *documentError) Error() string { return e.Message }
