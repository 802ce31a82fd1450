package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/process"
)

// Launch says how to start the proxy process: `isx proxy serve`, detached
// from whatever started it, so that it outlives `isx branch` or `isx mcp`.
type Launch struct {
	// Executable and Args run the proxy (the isx binary, "proxy", "serve" …).
	Executable string
	Args       []string
	// Env is the process's environment (nil: this process's).
	Env []string
	// Timeout bounds the wait for it to answer; default 15 s.
	Timeout time.Duration
	Clock   clock.Clock
}

// Ensure returns the control client of home's proxy, starting the proxy
// first when none answers; started says whether it did.
func Ensure(ctx context.Context, home string, launch Launch) (c *Control, started bool, err error) {
	c = Connect(home)
	if _, err := c.Status(ctx); err == nil {
		return c, false, nil
	} else if !IsNotRunning(err) {
		return nil, false, err
	}
	if _, err := Start(ctx, home, launch); err != nil {
		return nil, false, err
	}
	return c, true, nil
}

// Start starts the proxy process and waits until it answers. When another
// start won the race, the proxy that answers is as good.
func Start(ctx context.Context, home string, launch Launch) (Status, error) {
	if launch.Timeout == 0 {
		launch.Timeout = 15 * time.Second
	}
	if launch.Clock == nil {
		launch.Clock = clock.Real{}
	}
	dir := config.ProxyDir(home)
	if err := privateDir(dir); err != nil {
		return Status{}, err
	}
	logPath := filepath.Join(dir, LogFile)
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return Status{}, coded.Wrap(CodeState, err, "cannot open the proxy's log %s", logPath)
	}
	defer out.Close()
	cmd := exec.Command(launch.Executable, launch.Args...)
	cmd.Env = launch.Env
	cmd.Stdout, cmd.Stderr = out, out
	// A session of its own: no terminal's hangup or Ctrl-C reaches it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return Status{}, coded.Wrap(CodeStartFailed, err, "cannot start the isx host proxy (%s)", launch.Executable)
	}
	c := Connect(home)
	deadline := launch.Clock.Now().Add(launch.Timeout)
	for {
		status, err := c.Status(ctx)
		if err == nil {
			// It runs on without us; it is not our child to wait for.
			if relErr := cmd.Process.Release(); relErr != nil {
				return status, fmt.Errorf("letting the proxy go: %w", relErr)
			}
			return status, nil
		}
		if ended(cmd.Process.Pid) || launch.Clock.Now().After(deadline) || ctx.Err() != nil {
			cmd.Process.Kill() //nolint:errcheck // it may have ended already
			waitErr := cmd.Wait()
			if status, err := c.Status(ctx); err == nil {
				return status, nil
			}
			return Status{}, coded.New(CodeStartFailed, "the isx host proxy did not start (%v); its log %s says:\n%s", waitErr, logPath, logTail(logPath))
		}
		select {
		case <-ctx.Done():
		case <-launch.Clock.After(50 * time.Millisecond):
		}
	}
}

// ended reports whether the child is gone or a zombie.
func ended(pid int) bool {
	stat, err := process.Read(pid)
	return errors.Is(err, process.ErrGone) || stat.State == "Z"
}

// logTail is the end of the log, for a message.
func logTail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	defer f.Close()
	const tail = 2048
	if info, err := f.Stat(); err == nil && info.Size() > tail {
		f.Seek(-tail, io.SeekEnd) //nolint:errcheck // read from the start then
	}
	data, _ := io.ReadAll(f)
	return strings.TrimSpace(string(data))
}

// StopAndWait stops home's proxy and waits until it no longer answers.
func StopAndWait(ctx context.Context, home string, clk clock.Clock) error {
	if clk == nil {
		clk = clock.Real{}
	}
	c := Connect(home)
	if err := c.Stop(ctx); err != nil {
		return err
	}
	deadline := clk.Now().Add(30 * time.Second)
	for {
		if _, err := c.Status(ctx); IsNotRunning(err) {
			return waitUnlocked(ctx, home, clk, deadline)
		}
		if clk.Now().After(deadline) {
			return coded.New(CodeControl, "the isx host proxy was asked to stop and still answers after 30 s")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-clk.After(50 * time.Millisecond):
		}
	}
}

// waitUnlocked waits until the stopped proxy has let go of its lock, so
// that a proxy started next does not find it held.
func waitUnlocked(ctx context.Context, home string, clk clock.Clock, deadline time.Time) error {
	path := filepath.Join(config.ProxyDir(home), lockFile)
	for {
		file, err := os.OpenFile(path, os.O_RDWR, 0o600)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return coded.Wrap(CodeState, err, "cannot open the proxy's lock %s", path)
		}
		err = syscall.Flock(int(file.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		file.Close()
		if err == nil {
			return nil
		}
		if clk.Now().After(deadline) {
			return coded.New(CodeControl, "the isx host proxy stopped answering but still holds its lock %s", path)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-clk.After(50 * time.Millisecond):
		}
	}
}
