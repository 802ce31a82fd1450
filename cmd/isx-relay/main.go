// Command isx-relay runs inside an isx instance: it listens on the
// instance's loopback and connects each connection to the instance's own
// socket of the host proxy (package relay says why).
//
//	isx-relay [-pidfile FILE] 127.0.0.1:PORT=SOCKET...
//
// binds every address, starts a detached copy of itself serving them,
// writes that copy's pid to FILE and exits: once it has exited, every
// address accepts. The host proxy runs it once per start of the instance.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/incusspawn/isx/internal/isx/relay"
)

// serveFlag marks the detached copy; its listeners are descriptors 3 on.
const serveFlag = "serve-inherited"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "isx-relay:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	flags := flag.NewFlagSet("isx-relay", flag.ContinueOnError)
	pidfile := flags.String("pidfile", "", "write the serving relay's pid here")
	inherited := flags.Bool(serveFlag, false, "serve listeners handed down as descriptors 3 on (the detached copy)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() == 0 {
		return fmt.Errorf("no 127.0.0.1:PORT=SOCKET given")
	}
	forwards := make([]relay.Forward, flags.NArg())
	for i, arg := range flags.Args() {
		f, err := relay.Parse(arg)
		if err != nil {
			return err
		}
		forwards[i] = f
	}
	if *inherited {
		return serve(forwards)
	}
	return detach(forwards, *pidfile)
}

// detach binds every forward here, so that a taken address fails this
// command, and leaves the serving to a copy in a session of its own (out
// of the exec that started it, whose process group may be killed).
func detach(forwards []relay.Forward, pidfile string) error {
	listeners := make([]*os.File, len(forwards))
	args := []string{"-" + serveFlag}
	for i, f := range forwards {
		l, err := relay.Listen(f)
		if err != nil {
			return err
		}
		listeners[i] = l
		args = append(args, f.String())
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, args...)
	cmd.ExtraFiles = listeners
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the serving relay: %w", err)
	}
	if pidfile == "" {
		return nil
	}
	return writePID(pidfile, cmd.Process.Pid)
}

func writePID(path string, pid int) error {
	temporary := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".new")
	if err := os.WriteFile(temporary, []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(temporary, path)
}

// serve relays every inherited listener until the process is killed.
func serve(forwards []relay.Forward) error {
	failed := make(chan error, len(forwards))
	for i, f := range forwards {
		l, err := relay.Inherited(3+i, f)
		if err != nil {
			return err
		}
		go func() { failed <- relay.Serve(l, f.Socket) }()
	}
	return <-failed
}
