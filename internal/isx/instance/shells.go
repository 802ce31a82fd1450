package instance

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/process"
)

// While `isx shell` runs, a marker file on the host says that a person is
// in that instance, so that isx mcp's orphan sweep leaves it alone. The
// marker is named <project>.<instance>.<pid> and holds the pid and its
// start time, so a marker left behind by a killed isx shell stops counting
// as soon as its process is gone, even if the pid is reused.

// ShellsDir holds the markers.
func ShellsDir(home string) string { return filepath.Join(config.StateDir(home), "shells") }

// Shell is one running `isx shell`.
type Shell struct {
	Project  string
	Instance string
	PID      int
	File     string
}

// MarkShell records that process pid is a shell in the instance, and
// returns a function that removes the record.
func MarkShell(home, project, instance string, pid int) (release func() error, err error) {
	dir := ShellsDir(home)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("recording the shell in %s: %w", dir, err)
	}
	stat, err := process.Read(pid)
	if err != nil {
		return nil, fmt.Errorf("recording the shell: process %d: %w", pid, err)
	}
	file := filepath.Join(dir, markerName(project, instance, pid))
	content := fmt.Sprintf("%d %s\n", pid, stat.Start)
	if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
		return nil, fmt.Errorf("recording the shell: %w", err)
	}
	return func() error {
		if err := os.Remove(file); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing the shell record %s: %w", file, err)
		}
		return nil
	}, nil
}

func markerName(project, instance string, pid int) string {
	return markerPrefix(project, instance) + strconv.Itoa(pid)
}

// markerPrefix is unambiguous because instance names hold no dots and
// what follows it must be all digits.
func markerPrefix(project, instance string) string {
	if project == "" {
		project = "default"
	}
	return project + "." + instance + "."
}

// Attended reports whether a person is in the instance with `isx shell`
// right now. When the records cannot be read it answers true: a caller
// deciding whether to destroy the instance must not guess that nobody is
// there.
func Attended(home, project, instance string) bool {
	shells, err := Shells(home, project, instance)
	return err != nil || len(shells) > 0
}

// Shells lists the live `isx shell` processes in the instance. Records of
// processes that are gone are removed on the way.
func Shells(home, project, instance string) ([]Shell, error) {
	dir := ShellsDir(home)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the shell records in %s: %w", dir, err)
	}
	prefix := markerPrefix(project, instance)
	var live []Shell
	var errs []error
	for _, entry := range entries {
		pid, err := strconv.Atoi(strings.TrimPrefix(entry.Name(), prefix))
		if !strings.HasPrefix(entry.Name(), prefix) || err != nil || pid <= 0 {
			continue
		}
		file := filepath.Join(dir, entry.Name())
		alive, err := markerAlive(file, pid)
		switch {
		case err != nil:
			errs = append(errs, err)
		case alive:
			live = append(live, Shell{Project: project, Instance: instance, PID: pid, File: file})
		default:
			if err := os.Remove(file); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("removing the stale shell record %s: %w", file, err))
			}
		}
	}
	return live, errors.Join(errs...)
}

// markerAlive checks that the recorded process still runs and is the same
// process (same start time) that wrote the marker.
func markerAlive(file string, pid int) (bool, error) {
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading the shell record %s: %w", file, err)
	}
	fields := strings.Fields(string(data))
	stat, err := process.Read(pid)
	if errors.Is(err, process.ErrGone) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return len(fields) == 2 && fields[1] == stat.Start && stat.State != "Z", nil
}
