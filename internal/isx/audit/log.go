// Package audit keeps isx mcp's audit trail: one JSON line per MCP call in
// ~/.local/state/incus-spawn/mcp.log, with credentials scrubbed from
// everything written, rotated by size. Several isx mcp processes may append
// to the same log at once: each write and rotation happens under an
// exclusive lock on a file beside it.
package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Defaults for Options.
const (
	DefaultMaxBytes = 10 << 20 // rotate once the log would grow past this
	DefaultKeep     = 3        // rotated logs kept: mcp.log.1 … mcp.log.3
)

// FileName is the log's name inside the state directory.
const FileName = "mcp.log"

// Outcomes of a call.
const (
	OutcomeOK      = "ok"      // the tool did what was asked
	OutcomeRefused = "refused" // a refusal: isError with a code
	OutcomeError   = "error"   // a protocol error: no tool result at all
)

// Entry is one call. Arguments, Result and Message are scrubbed by Append,
// whoever filled them.
type Entry struct {
	Time       time.Time       `json:"time"`
	Session    string          `json:"session"`
	Tool       string          `json:"tool"`
	Arguments  json.RawMessage `json:"arguments,omitempty"`
	Outcome    string          `json:"outcome"`
	Code       string          `json:"code,omitempty"`
	Message    string          `json:"message,omitempty"`
	Instance   string          `json:"instance,omitempty"`
	TaskID     string          `json:"task_id,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	DurationMS int64           `json:"duration_ms"`
}

// Options say where the log is and how it rotates.
type Options struct {
	MaxBytes int64 // DefaultMaxBytes when zero
	Keep     int   // DefaultKeep when zero
}

// Log appends entries to one log file. It is safe for concurrent use.
type Log struct {
	path     string
	maxBytes int64
	keep     int

	mu   sync.Mutex
	file *os.File // nil until the first successful open
	lock *os.File
}

// Open prepares the log at path (its directory is made 0700, the file
// 0600). It does not fail when the file cannot be opened yet: Ready and
// Append report that, so that a caller can refuse work it cannot log.
func Open(path string, opts Options) *Log {
	l := &Log{path: path, maxBytes: opts.MaxBytes, keep: opts.Keep}
	if l.maxBytes <= 0 {
		l.maxBytes = DefaultMaxBytes
	}
	if l.keep <= 0 {
		l.keep = DefaultKeep
	}
	return l
}

// Path is the log file.
func (l *Log) Path() string { return l.path }

// Ready opens the log if it is not open, and says why it cannot be
// written when it cannot.
func (l *Log) Ready() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open()
}

func (l *Log) open() error {
	if l.file != nil {
		return nil
	}
	dir := filepath.Dir(l.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("the audit log directory %s cannot be made: %w", dir, err)
	}
	lock, err := os.OpenFile(l.path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("the audit log lock %s.lock cannot be opened: %w", l.path, err)
	}
	file, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		lock.Close()
		return fmt.Errorf("the audit log %s cannot be opened: %w", l.path, err)
	}
	l.file, l.lock = file, lock
	return nil
}

// Append writes one entry as a JSON line, scrubbed, rotating the log first
// when the line would take it past MaxBytes.
func (l *Log) Append(e Entry) error {
	line, err := encode(e)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.open(); err != nil {
		return err
	}
	if err := syscall.Flock(int(l.lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("locking the audit log: %w", err)
	}
	defer syscall.Flock(int(l.lock.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing the lock file would release it too
	if err := l.follow(); err != nil {
		return err
	}
	if err := l.rotateFor(int64(len(line))); err != nil {
		return err
	}
	if _, err := l.file.Write(line); err != nil {
		return fmt.Errorf("writing the audit log %s: %w", l.path, err)
	}
	return nil
}

// follow reopens the log when another process rotated it away from under
// the open file.
func (l *Log) follow() error {
	open, err := l.file.Stat()
	if err != nil {
		return fmt.Errorf("reading the audit log %s: %w", l.path, err)
	}
	current, err := os.Stat(l.path)
	if err == nil && os.SameFile(open, current) {
		return nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("reading the audit log %s: %w", l.path, err)
	}
	return l.reopen()
}

func (l *Log) reopen() error {
	file, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("the audit log %s cannot be opened: %w", l.path, err)
	}
	l.file.Close()
	l.file = file
	return nil
}

// rotateFor shifts mcp.log to mcp.log.1 (and so on, dropping the oldest)
// when adding size bytes would pass the limit. A log that is empty is
// never rotated, so one line longer than the limit still gets written.
func (l *Log) rotateFor(size int64) error {
	info, err := l.file.Stat()
	if err != nil {
		return fmt.Errorf("reading the audit log %s: %w", l.path, err)
	}
	if info.Size() == 0 || info.Size()+size <= l.maxBytes {
		return nil
	}
	for i := l.keep - 1; i >= 1; i-- {
		err := os.Rename(rotated(l.path, i), rotated(l.path, i+1))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("rotating the audit log: %w", err)
		}
	}
	if err := os.Rename(l.path, rotated(l.path, 1)); err != nil {
		return fmt.Errorf("rotating the audit log: %w", err)
	}
	return l.reopen()
}

func rotated(path string, n int) string { return path + "." + strconv.Itoa(n) }

// Close closes the log; a later Append opens it again.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file == nil {
		return nil
	}
	err := errors.Join(l.file.Close(), l.lock.Close())
	l.file, l.lock = nil, nil
	return err
}

// encode scrubs the entry and makes it one line.
func encode(e Entry) ([]byte, error) {
	e.Arguments = ScrubJSON(e.Arguments)
	e.Result = ScrubJSON(e.Result)
	e.Message = ScrubText(e.Message)
	e.Time = e.Time.UTC()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		return nil, fmt.Errorf("encoding an audit entry: %w", err)
	}
	return b.Bytes(), nil
}
