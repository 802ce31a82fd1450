package proxy

import (
	"os"
	"path/filepath"
	"sync"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/config"
)

// maxLog is the size at which the log is moved aside to proxy.log.1.
const maxLog = 10 << 20

// Log is the proxy's log file: appended to, readable by the user alone,
// and moved aside once it grows past maxLog, so that a flood of refusals
// never fills the disk.
type Log struct {
	path string
	mu   sync.Mutex
	file *os.File
	size int64
}

// OpenLog opens home's proxy log.
func OpenLog(home string) (*Log, error) {
	dir := config.ProxyDir(home)
	if err := privateDir(dir); err != nil {
		return nil, err
	}
	l := &Log{path: filepath.Join(dir, LogFile)}
	return l, l.open()
}

// Path is the log file.
func (l *Log) Path() string { return l.path }

func (l *Log) open() error {
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return coded.Wrap(CodeState, err, "cannot open the proxy's log %s", l.path)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return coded.Wrap(CodeState, err, "cannot open the proxy's log %s", l.path)
	}
	l.file, l.size = f, info.Size()
	return nil
}

func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.size+int64(len(p)) > maxLog {
		l.file.Close()
		os.Rename(l.path, l.path+".1") //nolint:errcheck // reopening below reports what matters
		if err := l.open(); err != nil {
			return 0, err
		}
	}
	n, err := l.file.Write(p)
	l.size += int64(n)
	return n, err
}

// Close closes the file.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.file.Close()
}
