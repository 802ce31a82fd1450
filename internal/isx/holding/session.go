package holding

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/process"
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
	stat, err := process.Read(pid)
	if err != nil {
		return "", fmt.Errorf("reading process %d to name the MCP session: %w", pid, err)
	}
	start := stat.Start
	if stat.State == "Z" {
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
	return process.Alive(pid, start)
}

// CoordinatorSession is the session of the coordinator instance name:
// the instance itself, refused unless it holds the grant.
func CoordinatorSession(ctx context.Context, c *incus.Client, name string) (string, error) {
	inst, _, err := c.GetInstance(ctx, name)
	if err != nil {
		return "", err
	}
	if !instance.Coordinator(inst) {
		return "", refuse(CodeRefused, "", "%s may not call isx mcp: only `isx branch --mcp-client` grants it", name)
	}
	return instance.CoordinatorSession(inst), nil
}
