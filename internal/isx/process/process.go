// Package process identifies a host process by its pid and its start time,
// so that a later process that reuses the pid is told apart: isx records
// who holds an instance (an isx mcp session) and who is in one (isx shell)
// this way, and any other process on the host can check whether they still
// run.
package process

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ErrGone is returned for a pid no process has.
var ErrGone = errors.New("no such process")

// Stat is what /proc/<pid>/stat says of a process that isx needs.
type Stat struct {
	// Start is the start time in clock ticks since boot (field 22).
	Start string
	// State is the one-letter state (field 3); "Z" is a zombie.
	State string
}

// Read reads a process's start time and state.
func Read(pid int) (Stat, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return Stat{}, ErrGone
	}
	if err != nil {
		return Stat{}, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	stat := string(data)
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return Stat{}, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	fields := strings.Fields(stat[end+1:])
	// fields[0] is field 3 (state), so field 22 is fields[19].
	if len(fields) < 20 {
		return Stat{}, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	return Stat{Start: fields[19], State: fields[0]}, nil
}

// Alive says whether pid is still the process that started at start: gone,
// a zombie, or a reused pid is not. A /proc that cannot be read for another
// reason counts as alive, so that nothing is taken from a process that may
// still run.
func Alive(pid int, start string) bool {
	stat, err := Read(pid)
	if err != nil {
		return !errors.Is(err, ErrGone)
	}
	return stat.Start == start && stat.State != "Z"
}
