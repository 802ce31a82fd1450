package proxy

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/config"
)

// CodeUnsafeRouteSecret: a route's secret file, its directory or the
// configuration directory is not the user's alone; the route is refused
// (503) until it is fixed.
const CodeUnsafeRouteSecret = "unsafe_route_secret"

// routeSecret is the route's own secret, made the first time (and again
// at once after the file was deleted). It looks at the three paths on
// every request rather than watching them: a chmod, chown, rewrite or
// delete then counts from the very next request, with no watcher to miss
// an event or to lag behind, for a few stat calls.
func (s *Server) routeSecret(name string) (string, error) {
	owner := s.owner
	configDir := config.Dir(s.opts.Home)
	if err := s.routeSafeDir(configDir); err != nil {
		return "", err
	}
	dir := config.HostRoutesDir(s.opts.Home)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", coded.Wrap(CodeState, err, "cannot make the directory of the route secrets %s", dir)
	}
	if err := s.routeSafeDir(dir); err != nil {
		return "", err
	}
	path := config.RouteSecretPath(s.opts.Home, name)
	secret, err := owner.readSecret(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s.makeRouteSecret(path)
	}
	return secret, err
}

// makeRouteSecret writes a new secret where none is, readable by the
// user alone. Two requests racing to make it agree on one: the file is
// linked into place only if none is there yet.
func (s *Server) makeRouteSecret(path string) (string, error) {
	raw := make([]byte, secretBytes)
	if _, err := io.ReadFull(s.opts.Random, raw); err != nil {
		return "", fmt.Errorf("making a route secret: %w", err)
	}
	secret := hex.EncodeToString(raw)
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return "", coded.Wrap(CodeState, err, "cannot write the route secret %s", path)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(secret + "\n")
	if err == nil {
		err = tmp.Chmod(0o600)
	}
	if closeErr := tmp.Close(); err == nil {
		err = closeErr
	}
	if err == nil {
		err = os.Link(tmp.Name(), path)
	}
	if errors.Is(err, fs.ErrExist) {
		return s.owner.readSecret(path)
	}
	if err != nil {
		return "", coded.Wrap(CodeState, err, "cannot write the route secret %s", path)
	}
	s.opts.Log.Info("made a new route secret", "file", path)
	return secret, nil
}

// routeSafeDir refuses a directory that is not the user's or that others
// can write to, as accounts.yaml's is refused (config.Owner).
func (s *Server) routeSafeDir(path string) error {
	return routeUnsafe(path, s.owner.SafeDir(path))
}

// readSecret reads a secret file that only the user can read: opened
// once, the open file checked, never through a symbolic link.
func (o routeOwner) readSecret(path string) (string, error) {
	data, _, err := o.ReadPrivate(path, false, 4<<10)
	if errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if err != nil {
		return "", routeUnsafe(path, err)
	}
	secret := strings.TrimSpace(string(data))
	if secret == "" {
		return "", unsafef("%s is empty; delete it and the proxy makes a new secret", path)
	}
	return secret, nil
}

// routeOwner is the user the route secrets' paths must belong to.
type routeOwner struct{ config.Owner }

// routeUnsafe codes a problem with a route secret's path: 503 until it
// is fixed.
func routeUnsafe(path string, err error) error {
	if err == nil {
		return nil
	}
	var unsafe *config.UnsafeError
	if errors.As(err, &unsafe) {
		return coded.Wrap(CodeUnsafeRouteSecret, err, "%s %s", unsafe.Path, unsafe.Why())
	}
	return coded.Wrap(CodeUnsafeRouteSecret, err, "%s cannot be looked at", path)
}

func unsafef(format string, args ...any) error {
	return coded.New(CodeUnsafeRouteSecret, format, args...)
}
