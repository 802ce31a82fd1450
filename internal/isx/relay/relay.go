// Package relay is what runs inside an instance to let its processes reach
// the host proxy at a loopback TCP address: it accepts there and connects
// each connection to the instance's own host socket, which Incus shares
// into the instance as a disk device. Incus's proxy device would do the
// same, but incusd polls its forkproxy's log once a second at every start,
// which put a second on the path to every instance being ready.
//
// It uses no package that needs cgo (net does, for its resolver), so that
// the binary is static however it is built and runs in any image, busybox
// included.
package relay

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Forward is one address the relay listens on, on the instance's
// loopback, and the unix socket it connects each connection to.
type Forward struct {
	Port   int
	Socket string
}

// String is the form Parse reads.
func (f Forward) String() string { return "127.0.0.1:" + strconv.Itoa(f.Port) + "=" + f.Socket }

// Parse reads "127.0.0.1:PORT=/path/of/socket". Only the loopback is
// accepted: the relay must never open the proxy to the instance's network.
func Parse(arg string) (Forward, error) {
	address, socket, ok := strings.Cut(arg, "=")
	if !ok || socket == "" {
		return Forward{}, fmt.Errorf("%q is not ADDRESS=SOCKET (for example 127.0.0.1:3128=/opt/isx/proxy/proxy.sock)", arg)
	}
	port, ok := strings.CutPrefix(address, "127.0.0.1:")
	if !ok {
		return Forward{}, fmt.Errorf("%q listens on %s; the relay listens on 127.0.0.1 only", arg, address)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return Forward{}, fmt.Errorf("%q has no port between 1 and 65535", arg)
	}
	if !strings.HasPrefix(socket, "/") || len(socket) > 107 {
		return Forward{}, fmt.Errorf("%q: the socket must be an absolute path of at most 107 bytes", arg)
	}
	return Forward{Port: n, Socket: socket}, nil
}

// Listen binds the forward's address. The file is the listening socket,
// for Serve here or in another process (the detached relay).
func Listen(f Forward) (*os.File, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC|syscall.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("relay: socket: %w", err)
	}
	fail := func(what string, err error) (*os.File, error) {
		syscall.Close(fd)
		return nil, fmt.Errorf("relay: %s 127.0.0.1:%d: %w", what, f.Port, err)
	}
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		return fail("setting SO_REUSEADDR on", err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Port: f.Port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return fail("binding", err)
	}
	if err := syscall.Listen(fd, syscall.SOMAXCONN); err != nil {
		return fail("listening on", err)
	}
	return os.NewFile(uintptr(fd), "tcp:"+f.String()), nil
}

// Inherited is a listening socket Listen made in another process and
// handed down as descriptor fd. Handing it down made it blocking again
// (os/exec does), and Serve waits in the runtime's poller.
func Inherited(fd int, f Forward) (*os.File, error) {
	if err := syscall.SetNonblock(fd, true); err != nil {
		return nil, fmt.Errorf("relay: descriptor %d for %s: %w", fd, f, err)
	}
	return os.NewFile(uintptr(fd), "tcp:"+f.String()), nil
}

// Serve accepts on listener until it is closed, connecting each
// connection to socket. A connection whose socket does not answer is
// closed at once: the host proxy is not serving the instance (yet).
func Serve(listener *os.File, socket string) error {
	raw, err := listener.SyscallConn()
	if err != nil {
		return err
	}
	for {
		var conn int
		var acceptErr error
		// Read waits in the poller until a connection is there, so no
		// thread blocks in accept.
		err := raw.Read(func(fd uintptr) bool {
			conn, _, acceptErr = syscall.Accept4(int(fd), syscall.SOCK_CLOEXEC|syscall.SOCK_NONBLOCK)
			return !errors.Is(acceptErr, syscall.EAGAIN)
		})
		if err != nil {
			return err
		}
		switch {
		case acceptErr == nil:
			go relay(os.NewFile(uintptr(conn), "tcp"), socket)
		case errors.Is(acceptErr, syscall.EINTR), errors.Is(acceptErr, syscall.ECONNABORTED),
			errors.Is(acceptErr, syscall.EMFILE), errors.Is(acceptErr, syscall.ENFILE):
			// A connection gone before it was accepted, or no descriptor
			// for it now: the next one may do.
		default:
			return fmt.Errorf("relay: accept: %w", acceptErr)
		}
	}
}

// relay copies both ways between conn and a new connection to socket,
// passing on each side's end of writing, until both are done.
func relay(conn *os.File, socket string) {
	defer conn.Close()
	upstream, err := dial(socket)
	if err != nil {
		return
	}
	defer upstream.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		copyThenShut(upstream, conn)
	}()
	copyThenShut(conn, upstream)
	<-done
}

func copyThenShut(to, from *os.File) {
	_, _ = io.Copy(to, from) // an error ends this direction as EOF does
	if raw, err := to.SyscallConn(); err == nil {
		_ = raw.Control(func(fd uintptr) { _ = syscall.Shutdown(int(fd), syscall.SHUT_WR) })
	}
}

// dial connects to the unix socket; the file is non-blocking, so that
// its reads and writes wait in the runtime's poller.
func dial(socket string) (*os.File, error) {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := syscall.Connect(fd, &syscall.SockaddrUnix{Name: socket}); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), "unix:"+socket), nil
}
