package proxy

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

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
	if err := owner.safeDir(configDir); err != nil {
		return "", err
	}
	dir := config.HostRoutesDir(s.opts.Home)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", coded.Wrap(CodeState, err, "cannot make the directory of the route secrets %s", dir)
	}
	if err := owner.safeDir(dir); err != nil {
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

// fileOwner is the host user the proxy runs as, whom the route secrets'
// paths must belong to.
type fileOwner struct {
	uid  uint32
	gid  uint32
	name string
	// groupFile and passwdFile tell a private group from a shared one.
	groupFile, passwdFile string
}

func currentOwner() fileOwner {
	o := fileOwner{uid: uint32(os.Getuid()), gid: uint32(os.Getgid()), groupFile: "/etc/group", passwdFile: "/etc/passwd"}
	if u, err := user.Current(); err == nil {
		o.name = u.Username
	}
	return o
}

func unsafef(format string, args ...any) error {
	return coded.New(CodeUnsafeRouteSecret, format, args...)
}

// safeDir refuses a directory that is not the user's or that others can
// write to; the user's own private group may (a umask of 002 makes it so).
func (o fileOwner) safeDir(path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return coded.Wrap(CodeUnsafeRouteSecret, err, "%s cannot be looked at", path)
	}
	st := info.Sys().(*syscall.Stat_t)
	mode := info.Mode().Perm()
	switch {
	case !info.IsDir():
		return unsafef("%s is not a directory", path)
	case st.Uid != o.uid:
		return unsafef("%s belongs to uid %d, not to you; `chown %d %s`", path, st.Uid, o.uid, path)
	case mode&0o002 != 0:
		return unsafef("%s is writable by anyone; `chmod o-w %s`", path, path)
	case mode&0o020 != 0 && !o.privateGroup(st.Gid):
		return unsafef("%s is writable by group %d, which others share; `chmod g-w %s`", path, st.Gid, path)
	}
	return nil
}

// readSecret reads a secret file that only the user can read.
func (o fileOwner) readSecret(path string) (string, error) {
	info, err := os.Lstat(path)
	if err != nil {
		return "", err
	}
	st := info.Sys().(*syscall.Stat_t)
	switch {
	case !info.Mode().IsRegular():
		return "", unsafef("%s is not a plain file; delete it and the proxy makes a new secret", path)
	case st.Uid != o.uid:
		return "", unsafef("%s belongs to uid %d, not to you; `chown %d %s`, or delete it for a new one", path, st.Uid, o.uid, path)
	case info.Mode().Perm()&0o077 != 0:
		return "", unsafef("%s can be read or written by others (mode %04o); `chmod 600 %s`", path, info.Mode().Perm(), path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", coded.Wrap(CodeUnsafeRouteSecret, err, "%s cannot be read", path)
	}
	secret := strings.TrimSpace(string(data))
	if secret == "" {
		return "", unsafef("%s is empty; delete it and the proxy makes a new secret", path)
	}
	return secret, nil
}

// privateGroup reports whether gid is the user's own group: the user's
// primary group, which no other account has as its primary group or
// lists as a member.
func (o fileOwner) privateGroup(gid uint32) bool {
	if gid != o.gid {
		return false
	}
	want := strconv.FormatUint(uint64(gid), 10)
	others := false
	groupErr := scan(o.groupFile, func(fields []string) {
		if len(fields) >= 4 && fields[2] == want {
			for _, member := range strings.Split(fields[3], ",") {
				if member != "" && member != o.name {
					others = true
				}
			}
		}
	})
	passwdErr := scan(o.passwdFile, func(fields []string) {
		if len(fields) >= 4 && fields[3] == want && fields[2] != strconv.FormatUint(uint64(o.uid), 10) {
			others = true
		}
	})
	// A database that cannot be read proves nothing: the group counts
	// as shared.
	return !others && groupErr == nil && passwdErr == nil
}

// scan calls line with the colon-separated fields of each line of an
// /etc database.
func scan(path string, line func([]string)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		line(strings.Split(lines.Text(), ":"))
	}
	return lines.Err()
}
