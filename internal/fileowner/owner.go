// Package fileowner tells whether a file or a directory holding a secret
// is the user's alone: owned by them, and writable (or, for a file,
// readable) by no one who could replace or read it. isx's account and
// route secrets and actiond's database (which holds its signing key) are
// checked by the same rules.
package fileowner

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"

	"github.com/incusspawn/isx/internal/coded"
)

// Owner is the host user whose files may hold a program's secrets, and
// who alone may be able to read them or change the directories they are
// in.
type Owner struct {
	UID, GID uint32
	Name     string
	// GroupFile and PasswdFile tell a private group from a shared one.
	GroupFile, PasswdFile string
}

// CurrentOwner is the user this process runs as.
func CurrentOwner() Owner {
	o := Owner{UID: uint32(os.Getuid()), GID: uint32(os.Getgid()), GroupFile: "/etc/group", PasswdFile: "/etc/passwd"}
	if u, err := user.Current(); err == nil {
		o.Name = u.Username
	}
	return o
}

// CodeUnsafe is the code of an *UnsafeError.
const CodeUnsafe = "unsafe_secret_path"

// UnsafeError says why someone other than the owner could read a secret
// or replace it (Reason), and the command that mends it (Fix, empty
// where there is none to give).
type UnsafeError struct {
	coded.Base
	Path, Reason, Fix string
}

func (e *UnsafeError) Error() string { return e.Message }

// Why is the reason and then the command that mends it.
func (e *UnsafeError) Why() string {
	if e.Fix == "" {
		return e.Reason
	}
	return e.Reason + "; `" + e.Fix + "`"
}

func unsafeAt(path, format string, args ...any) *UnsafeError {
	return mendable(path, "", format, args...)
}

// mendable is unsafeAt for a fault one command (fix) mends.
func mendable(path, fix, format string, args ...any) *UnsafeError {
	e := &UnsafeError{Path: path, Reason: fmt.Sprintf(format, args...), Fix: fix}
	e.Base = coded.Base{Code: CodeUnsafe, Message: path + ": " + e.Why()}
	return e
}

// SafeDir refuses (*UnsafeError) a directory that is not the owner's or
// that others can write to; the owner's own private group may (a umask
// of 002 makes it so), a group shared with anyone else may not.
func (o Owner) SafeDir(path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	mode := info.Mode().Perm()
	switch {
	case !info.IsDir():
		return unsafeAt(path, "is not a directory")
	case !ok:
		return unsafeAt(path, "cannot be looked at")
	case st.Uid != o.UID:
		return mendable(path, fmt.Sprintf("chown %d %s", o.UID, path), "belongs to uid %d, not to you (uid %d), so what is in it could be replaced", st.Uid, o.UID)
	case mode&0o002 != 0:
		return mendable(path, "chmod o-w "+path, "may be written by anyone (mode %04o), so what is in it could be replaced", mode)
	case mode&0o020 != 0 && !o.PrivateGroup(st.Gid):
		return mendable(path, "chmod g-w "+path, "may be written by group %d, which others share (mode %04o), so what is in it could be replaced", st.Gid, mode)
	}
	return nil
}

// ReadPrivate reads a file of at most limit bytes that only the owner
// may read or write. It opens the file once and checks what it opened,
// so that the file looked at is the file read, whatever replaces it
// meanwhile. With follow false a symbolic link is refused rather than
// followed. A missing file is fs.ErrNotExist; any other problem of its
// ownership or mode is an *UnsafeError.
func (o Owner) ReadPrivate(path string, follow bool, limit int64) ([]byte, fs.FileInfo, error) {
	// Non-blocking, so that a FIFO put there cannot hold the reader.
	flags := os.O_RDONLY | syscall.O_NONBLOCK
	if !follow {
		flags |= syscall.O_NOFOLLOW
	}
	f, err := os.OpenFile(path, flags, 0)
	if errors.Is(err, syscall.ELOOP) && !follow {
		return nil, nil, unsafeAt(path, "is a symbolic link, not a plain file; delete it")
	}
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	switch {
	case !info.Mode().IsRegular():
		return nil, nil, unsafeAt(path, "is not a plain file")
	case !ok:
		return nil, nil, unsafeAt(path, "cannot be looked at")
	case st.Uid != o.UID:
		return nil, nil, mendable(path, fmt.Sprintf("chown %d %s", o.UID, path), "belongs to uid %d, not to you (uid %d), so its owner may read or change it (if it is yours, take it back)", st.Uid, o.UID)
	case info.Mode().Perm()&0o077 != 0:
		return nil, nil, mendable(path, "chmod 600 "+path, "has mode %04o, so others may read or change it", info.Mode().Perm())
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, nil, err
	}
	if int64(len(data)) > limit {
		return nil, nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return data, info, nil
}

// PrivateGroup reports whether gid is the owner's own group: the owner's
// primary group, which no other account has as its primary group or
// lists as a member.
func (o Owner) PrivateGroup(gid uint32) bool {
	if gid != o.GID {
		return false
	}
	want := strconv.FormatUint(uint64(gid), 10)
	others := false
	groupErr := scanDatabase(o.GroupFile, func(fields []string) {
		if len(fields) >= 4 && fields[2] == want {
			for _, member := range strings.Split(fields[3], ",") {
				if member != "" && member != o.Name {
					others = true
				}
			}
		}
	})
	passwdErr := scanDatabase(o.PasswdFile, func(fields []string) {
		if len(fields) >= 4 && fields[3] == want && fields[2] != strconv.FormatUint(uint64(o.UID), 10) {
			others = true
		}
	})
	// A database that cannot be read proves nothing: the group counts
	// as shared.
	return !others && groupErr == nil && passwdErr == nil
}

// scanDatabase calls line with the colon-separated fields of each line
// of an /etc database.
func scanDatabase(path string, line func([]string)) error {
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
