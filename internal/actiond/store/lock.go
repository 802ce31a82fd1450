package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/incusspawn/isx/internal/coded"
)

// LockFile is the file in a SQLite data directory that the serving process
// holds locked for as long as it runs, and that says who it is.
const LockFile = "actiond.lock"

// CodeDataDirInUse: another process serves the SQLite data directory.
const CodeDataDirInUse = "store_data_dir_in_use"

// Holder is what a serving process writes into the lock file, so that the
// next one to try can name it.
type Holder struct {
	PID       int       `json:"pid"`
	Listen    string    `json:"listen,omitempty"`
	PublicURL string    `json:"publicURL,omitempty"`
	StartedAt time.Time `json:"startedAt"`
}

// DirLock is a SQLite data directory held by this process. SQLite has one
// writer, and a second process on the same files would settle the first
// one's work as abandoned and take over its public URL while it still ran;
// so one `actiond serve` holds the directory, as incusd and dockerd hold
// theirs. The kernel drops the lock when the process ends, however it ends.
type DirLock struct {
	file *os.File
}

// LockDataDir takes the data directory for this process, making it when
// it is missing, or refuses naming the process that holds it.
func LockDataDir(dir string, holder Holder) (*DirLock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, accessError(dir, "create the data directory", err)
	}
	if err := checkAccess(dir, filepath.Join(dir, DatabaseFile)); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, LockFile)
	file, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, accessError(path, "open the lock file", err)
	}
	if err := unix.Flock(int(file.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		file.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, inUse(dir, path)
		}
		return nil, fmt.Errorf("store: lock %s: %w", path, err)
	}
	record, _ := json.Marshal(holder)
	if err := file.Truncate(0); err == nil {
		_, err = file.WriteAt(append(record, '\n'), 0)
	}
	if err != nil {
		file.Close()
		return nil, fmt.Errorf("store: write %s: %w", path, err)
	}
	return &DirLock{file: file}, nil
}

// Release gives the directory up; the file stays, unlocked.
func (l *DirLock) Release() error {
	if l == nil || l.file == nil {
		return nil
	}
	err := l.file.Close()
	l.file = nil
	return err
}

// inUse names the holder as it wrote itself into the file (just after
// taking the lock: in the moment between, the file names no one).
func inUse(dir, path string) error {
	var holder Holder
	if raw, err := readSmall(path); err == nil {
		_ = json.Unmarshal(raw, &holder) // an unreadable record names no one
	}
	who := "another actiond serve"
	var about []string
	if holder.PID != 0 {
		about = append(about, fmt.Sprintf("pid %d", holder.PID))
	}
	if holder.Listen != "" {
		about = append(about, "listening on "+holder.Listen)
	}
	if holder.PublicURL != "" {
		about = append(about, "serving "+holder.PublicURL)
	}
	if !holder.StartedAt.IsZero() {
		about = append(about, "since "+holder.StartedAt.Local().Format("2006-01-02 15:04:05"))
	}
	if len(about) > 0 {
		who += " (" + strings.Join(about, ", ") + ")"
	}
	return coded.New(CodeDataDirInUse, "the data directory %s is in use by %s; one process serves a SQLite database", dir, who).
		WithHint("Stop that process first, or pass this one another --data directory. Several processes can serve one database only on Postgres (--postgres).")
}

func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 4096))
}
