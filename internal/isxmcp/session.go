package isxmcp

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A stdio session is one isx mcp process. Its id, stdio:<pid>:<start>, is
// stable for the process and lets any later process on the host tell
// whether it still runs: the pid with the same start time (field 22 of
// /proc/<pid>/stat) is the same process; a gone pid, a zombie or a reused
// pid is a dead session.
const stdioPrefix = "stdio:"

// StdioSession is the session id of the running process.
func StdioSession() (string, error) {
	return SessionOf(os.Getpid())
}

// SessionOf is the stdio session id of process pid.
func SessionOf(pid int) (string, error) {
	start, state, err := processStart(pid)
	if err != nil {
		return "", fmt.Errorf("reading process %d to name the MCP session: %w", pid, err)
	}
	if state == "Z" {
		return "", fmt.Errorf("process %d has exited", pid)
	}
	return stdioPrefix + strconv.Itoa(pid) + ":" + start, nil
}

// SessionAlive reports whether the session that id names still runs. Ids
// of other kinds of session (none yet besides stdio) count as alive, so
// that isx never takes or destroys what it cannot prove is abandoned.
func SessionAlive(id string) bool {
	rest, ok := strings.CutPrefix(id, stdioPrefix)
	if !ok {
		return id != ""
	}
	pidText, start, ok := strings.Cut(rest, ":")
	pid, err := strconv.Atoi(pidText)
	if !ok || err != nil || pid <= 0 {
		return false
	}
	current, state, err := processStart(pid)
	if err != nil {
		// Unreadable for another reason than absence: assume it runs.
		return !errors.Is(err, errNoProcess)
	}
	return current == start && state != "Z"
}

var errNoProcess = errors.New("no such process")

// processStart returns field 22 (start time in clock ticks since boot) and
// field 3 (state) of /proc/<pid>/stat.
func processStart(pid int) (start, state string, err error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", errNoProcess
	}
	if err != nil {
		return "", "", err
	}
	stat := string(data)
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return "", "", fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	fields := strings.Fields(stat[end+1:])
	if len(fields) < 20 {
		return "", "", fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	return fields[19], fields[0], nil
}
