package store

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/fileowner"
)

// CodeUnsafe is a data directory others may write, where the database
// (which holds the local issuer's private signing key) could be swapped or
// read by them.
const CodeUnsafe = "store_unsafe_data_dir"

// databaseMode is the mode of every file of the SQLite database: it holds
// the issuer's private signing key. SQLite gives its -wal and -shm files
// the database file's mode.
const databaseMode = 0o600

// checkPrivate refuses a data directory that belongs to another user or
// that others may write: anyone, or a group other accounts share. The
// user's own private group may write it (a umask of 002 makes it so).
func checkPrivate(dir string) error {
	err := fileowner.CurrentOwner().SafeDir(dir)
	var unsafe *fileowner.UnsafeError
	if !errors.As(err, &unsafe) {
		if err != nil {
			return accessError(dir, "look at the data directory", err)
		}
		return nil
	}
	refusal := coded.New(CodeUnsafe, "the data directory %s %s: it holds the database, with the token issuer's private key", dir, unsafe.Reason)
	if unsafe.Fix != "" {
		return refusal.WithHint("Run `" + unsafe.Fix + "`, or pass a --data directory of your own.")
	}
	return refusal.WithHint("Pass a --data directory of your own.")
}

// createPrivately makes the database file 0600 before SQLite opens it, and
// narrows an existing one (and its -wal and -shm files) that this user
// owns: a database an older actiond made was 0644.
func createPrivately(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, databaseMode)
	if err != nil {
		return accessError(path, "create the database file", err)
	}
	f.Close()
	for _, name := range []string{path, path + "-wal", path + "-shm"} {
		info, err := os.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return accessError(name, "look at the database file", err)
		}
		if !info.Mode().IsRegular() {
			return coded.New(CodeUnsafe, "%s is not a plain file", name).
				WithHint("Move it away; actiond keeps only plain files in " + filepath.Dir(path) + ".")
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Uid == uint32(os.Geteuid()) && info.Mode().Perm() != databaseMode {
			if err := os.Chmod(name, databaseMode); err != nil {
				return accessError(name, "make the database file private (mode 0600)", err)
			}
		}
	}
	return nil
}
