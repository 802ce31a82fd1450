package signin

import (
	"context"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/coded"
)

// No document is fetched from an address that is not a public one, the
// check made on the address dialled; loopback only where allowed.
func TestDocumentAddresses(t *testing.T) {
	local := newDocuments(DocumentOptions{Loopback: true})
	remote := newDocuments(DocumentOptions{})
	for address, want := range map[string]string{
		"10.0.0.1:443": "private", "192.168.1.5:443": "private", "172.16.0.1:443": "private", "[fd00::1]:443": "private",
		"169.254.169.254:80": "link-local", "[fe80::1]:443": "link-local", "[::ffff:10.0.0.1]:443": "private",
		"0.0.0.0:443": "unspecified", "100.64.0.1:443": "reserved", "[64:ff9b::a00:1]:443": "reserved", "239.1.2.3:443": "multicast",
	} {
		for _, d := range []*documents{local, remote} {
			err := d.checkDial("tcp", address, nil)
			if coded.CodeOf(err) != CodeDocumentAddress || err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("dial %s (loopback %v): %v, want a %s refusal", address, d.loopback, err, want)
			}
		}
	}
	if err := remote.checkDial("tcp", "127.0.0.1:443", nil); coded.CodeOf(err) != CodeDocumentAddress {
		t.Errorf("loopback outside the local environment: %v", err)
	}
	for _, address := range []string{"127.0.0.1:443", "[::1]:443"} {
		if err := local.checkDial("tcp", address, nil); err != nil {
			t.Errorf("loopback in the local environment: %v", err)
		}
	}
	if err := remote.checkDial("tcp", "93.184.215.14:443", nil); err != nil {
		t.Errorf("a public address: %v", err)
	}

	// Through a real fetch: a trusted server on loopback is refused when
	// loopback is not allowed, before any request reaches it.
	reached := false
	site := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached = true }))
	defer site.Close()
	roots := x509.NewCertPool()
	roots.AddCert(site.Certificate())
	strict := newDocuments(DocumentOptions{Roots: roots})
	_, err := strict.lookup(context.Background(), site.URL+"/client")
	if coded.CodeOf(err) != CodeDocumentAddress || reached {
		t.Fatalf("a loopback document outside the local environment: %v (reached %v)", err, reached)
	}
}

// A document is reused as long as its headers say, for a private cache.
func TestDocumentFreshness(t *testing.T) {
	now := time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)
	date := now.Format(http.TimeFormat)
	for name, c := range map[string]struct {
		header http.Header
		want   time.Duration
	}{
		"none":             {http.Header{}, 0},
		"max-age":          {http.Header{"Cache-Control": {"public, max-age=300"}}, 5 * time.Minute},
		"max-age and age":  {http.Header{"Cache-Control": {"max-age=300"}, "Age": {"100"}}, 200 * time.Second},
		"no-store":         {http.Header{"Cache-Control": {"max-age=300, no-store"}}, 0},
		"no-cache":         {http.Header{"Cache-Control": {"no-cache"}}, 0},
		"capped":           {http.Header{"Cache-Control": {"max-age=9999999"}}, 24 * time.Hour},
		"expires":          {http.Header{"Date": {date}, "Expires": {now.Add(time.Hour).Format(http.TimeFormat)}}, time.Hour},
		"invalid expires":  {http.Header{"Expires": {"0"}}, 0},
		"max-age first":    {http.Header{"Cache-Control": {"max-age=60"}, "Expires": {now.Add(time.Hour).Format(http.TimeFormat)}}, time.Minute},
		"last-modified":    {http.Header{"Date": {date}, "Last-Modified": {now.Add(-10 * time.Hour).Format(http.TimeFormat)}}, time.Hour},
		"negative max-age": {http.Header{"Cache-Control": {"max-age=-1"}}, 0},
	} {
		if got := freshness(c.header, now); got != c.want {
			t.Errorf("%s: fresh for %s, want %s", name, got, c.want)
		}
	}
}
