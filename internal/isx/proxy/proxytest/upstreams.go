package proxytest

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Server is a loopback HTTP server of this package.
type Server struct {
	URL    string
	Addr   string
	server *http.Server
	wg     sync.WaitGroup
}

func serve(h http.Handler) (*Server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxytest: listening: %w", err)
	}
	s := &Server{URL: "http://" + l.Addr().String(), Addr: l.Addr().String(), server: &http.Server{Handler: h, ReadHeaderTimeout: time.Minute}}
	s.wg.Go(func() { s.server.Serve(l) }) //nolint:errcheck // ends at Close
	return s, nil
}

// Close stops the server and every connection it holds.
func (s *Server) Close() {
	s.server.Close()
	s.wg.Wait()
}

// Git serves the repositories under Root over git's smart HTTP protocol,
// with the real git http-backend. With Token set, only requests carrying
// it as GitHub expects (Basic x-access-token:<token>) are served.
type Git struct {
	*Server
	Root  string
	Token string

	mu   sync.Mutex
	auth []string
}

// StartGit makes a repository org/repo.git under root with one commit
// holding README.md (content), and serves root.
func StartGit(root, token, content string) (*Git, error) {
	repo := filepath.Join(root, "org", "repo.git")
	work := filepath.Join(root, "work")
	for _, step := range [][]string{
		{"init", "-q", "-b", "main", work},
		{"-C", work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "empty"},
		{"clone", "-q", "--bare", work, repo},
		// A push is authenticated by the token check below, which the
		// backend cannot see, so it is allowed here.
		{"--git-dir", repo, "config", "http.receivepack", "true"},
	} {
		if step[0] == "-C" {
			if err := os.WriteFile(filepath.Join(work, "README.md"), []byte(content), 0o644); err != nil {
				return nil, err
			}
			if out, err := exec.Command("git", "-C", work, "add", "README.md").CombinedOutput(); err != nil {
				return nil, fmt.Errorf("proxytest: git add: %v: %s", err, out)
			}
		}
		if out, err := exec.Command("git", step...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("proxytest: git %v: %v: %s", step, err, out)
		}
	}
	g := &Git{Root: root, Token: token}
	backend := &cgi.Handler{
		Path: gitBackend(),
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
	}
	server, err := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.auth = append(g.auth, r.Header.Get("Authorization"))
		g.mu.Unlock()
		want := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+g.Token))
		if g.Token != "" && r.Header.Get("Authorization") != want {
			w.Header().Set("WWW-Authenticate", `Basic realm="fake github"`)
			http.Error(w, "credentials required", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	if err != nil {
		return nil, err
	}
	g.Server = server
	return g, nil
}

func gitBackend() string {
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		return "/usr/lib/git-core/git-http-backend"
	}
	return filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
}

// Authorizations are the Authorization headers requests arrived with.
func (g *Git) Authorizations() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.auth...)
}

// Downloads serves /pool/<name>_<size>.deb: size deterministic bytes, as
// a package mirror serves a package.
func StartDownloads() (*Server, error) {
	return serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		base := filepath.Base(r.URL.Path)
		_, sizeText, ok := strings.Cut(strings.TrimSuffix(base, ".deb"), "_")
		size, err := strconv.ParseInt(sizeText, 10, 64)
		if !ok || err != nil || size < 0 || size > 1<<31 {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/vnd.debian.binary-package")
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		io.CopyN(w, &Pattern{}, size) //nolint:errcheck // the client may stop reading
	}))
}

// Pattern is an endless reader of deterministic bytes: a, b, … z, a, …
type Pattern struct{ offset int64 }

func (r *Pattern) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte('a' + (r.offset+int64(i))%26)
	}
	r.offset += int64(len(p))
	return len(p), nil
}

// PatternSHA256 is the hex sha256 of the first n bytes of Pattern.
func PatternSHA256(n int64) string {
	h := sha256.New()
	io.CopyN(h, &Pattern{}, n) //nolint:errcheck // a hash never fails
	return hex.EncodeToString(h.Sum(nil))
}

// StartEcho serves a WebSocket at /echo that sends back every message.
func StartEcho() (*Server, error) {
	return serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx := context.Background()
		for {
			kind, data, err := c.Read(ctx)
			if err != nil {
				return
			}
			if err := c.Write(ctx, kind, data); err != nil {
				return
			}
		}
	}))
}
