// Package explorer serves the page people use to investigate what external
// agents did through actiond's MCP servers: servers, sessions, a session's
// requests as a timeline, one request in full with its call tree, and two
// executions side by side. The page is plain HTML, CSS and JavaScript
// embedded in the binary, with no build step and nothing fetched from
// elsewhere. It reads only through the public GraphQL API with the viewer's
// own authority, so it can show nothing GraphQL would not; this package
// serves files and holds no data.
package explorer

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
)

// Path is where the page is served.
const Path = "/explorer/"

//go:embed assets
var assets embed.FS

// ContentSecurityPolicy allows the page its own scripts, styles and the
// GraphQL API on the same origin, and nothing else: no inline script or
// style, no frames, no forms posting elsewhere, and Trusted Types with no
// policy, so that no script can turn what an agent sent into markup.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; " +
	"require-trusted-types-for 'script'; trusted-types 'none'"

// asset is one embedded file, ready to send.
type asset struct {
	body, gzipped []byte
	contentType   string
	etag          string
}

// Handler serves the page's files beneath Path. Every view is a fragment of
// /explorer/ (#/session/...), so a link to a view is a link to the page.
func Handler() (http.Handler, error) {
	files := map[string]*asset{}
	err := fs.WalkDir(assets, "assets", func(name string, entry fs.DirEntry, err error) error {
		if err != nil || entry.IsDir() {
			return err
		}
		body, err := assets.ReadFile(name)
		if err != nil {
			return err
		}
		a, err := prepare(name, body)
		if err != nil {
			return err
		}
		files[strings.TrimPrefix(name, "assets/")] = a
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("explorer: reading the embedded page: %w", err)
	}
	return &handler{files: files}, nil
}

func prepare(name string, body []byte) (*asset, error) {
	contentType := mime.TypeByExtension(path.Ext(name))
	if contentType == "" {
		return nil, fmt.Errorf("explorer: no content type for %s", name)
	}
	var packed bytes.Buffer
	zw, err := gzip.NewWriterLevel(&packed, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(body); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	return &asset{body: body, gzipped: packed.Bytes(), contentType: contentType,
		etag: `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`}, nil
}

type handler struct {
	files map[string]*asset
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	header := w.Header()
	header.Set("Content-Security-Policy", ContentSecurityPolicy)
	header.Set("X-Content-Type-Options", "nosniff")
	header.Set("Referrer-Policy", "no-referrer")
	header.Set("X-Frame-Options", "DENY")
	header.Set("Cross-Origin-Opener-Policy", "same-origin")
	header.Set("Cross-Origin-Resource-Policy", "same-origin")
	header.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), clipboard-write=(self)")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		header.Set("Allow", "GET, HEAD")
		http.Error(w, "the explorer is read with GET", http.StatusMethodNotAllowed)
		return
	}
	name := strings.TrimPrefix(r.URL.Path, Path)
	if name == "" {
		name = "index.html"
	}
	a, ok := h.files[name]
	if !ok {
		http.Error(w, "no such file in the explorer: its views are fragments of "+Path, http.StatusNotFound)
		return
	}
	// Revalidated every time, so that a new actiond's page is never mixed
	// with an old one's scripts; an unchanged file costs a 304.
	header.Set("Cache-Control", "no-cache")
	header.Set("ETag", a.etag)
	header.Set("Vary", "Accept-Encoding")
	header.Set("Content-Type", a.contentType)
	if match := r.Header.Get("If-None-Match"); match != "" && match == a.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := a.body
	if acceptsGzip(r) {
		header.Set("Content-Encoding", "gzip")
		body = a.gzipped
	}
	header.Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(coding), "gzip") && strings.ReplaceAll(params, " ", "") != "q=0" {
			return true
		}
	}
	return false
}
