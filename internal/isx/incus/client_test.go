package incus_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
)

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// assertUnavailable checks that err is ErrUnavailable and tells a person how
// to start the daemon.
func assertUnavailable(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, incus.ErrUnavailable) {
		t.Fatalf("error = %v, want ErrUnavailable", err)
	}
	for _, hint := range []string{"systemctl start incus", "/usr/libexec/incus/incusd --group root &", "scripts/incus-up.sh"} {
		if !strings.Contains(err.Error(), hint) {
			t.Errorf("error %q does not mention %q", err, hint)
		}
	}
}

func TestUnavailableWhenSocketMissing(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	c := incus.New(filepath.Join(t.TempDir(), "no-such.socket"))
	_, err := c.Server(ctx)
	assertUnavailable(t, err)
	_, err = c.Exec(ctx, "web", incus.ExecRequest{Command: []string{"true"}})
	assertUnavailable(t, err)
	_, err = c.Events(ctx, incus.EventLifecycle)
	assertUnavailable(t, err)
}

func TestUnavailableWhenNobodyListens(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	socket := filepath.Join(t.TempDir(), "dead.socket")
	listener, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	// Leave the socket file behind with nobody accepting on it, as a
	// crashed daemon does.
	listener.SetUnlinkOnClose(false)
	if err := listener.Close(); err != nil {
		t.Fatal(err)
	}
	c := incus.New(socket)
	_, err = c.Instances(ctx)
	assertUnavailable(t, err)
}

// A socket a named setting chose that is not there, or is no socket, is
// the setting's fault: the error names it and carries its fix as the hint,
// and is still ErrUnavailable. A socket nothing listens on is a daemon
// that is down, whoever named it.
func TestUnavailableNamesTheSetting(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(dir, "dead.socket")
	listener, err := net.ListenUnix("unix", &net.UnixAddr{Name: dead, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	listener.SetUnlinkOnClose(false)
	listener.Close()
	inMissingDir := filepath.Join(dir, "no-such-dir", "unix.socket")
	for socket, want := range map[string]string{
		inMissingDir: "SOCKET=" + inMissingDir + " points nowhere Incus listens (",
		file:         "SOCKET=" + file + " points nowhere Incus listens (it is not a socket",
		// A stopped daemon removes its socket: both causes are named.
		filepath.Join(dir, "missing"): "SOCKET=" + filepath.Join(dir, "missing") + " points nowhere Incus listens (",
	} {
		_, err := incus.New(socket, incus.WithSocketSetting("SOCKET=", "unset SOCKET")).Server(ctx)
		if !errors.Is(err, incus.ErrUnavailable) || !strings.Contains(err.Error(), want) || coded.HintOf(err) != "unset SOCKET" {
			t.Errorf("%s: %v (hint %q)", socket, err, coded.HintOf(err))
		}
		if daemon := strings.Contains(err.Error(), "systemctl start incus"); daemon != (socket == filepath.Join(dir, "missing")) {
			t.Errorf("%s: says how to start the daemon: %v; %v", socket, daemon, err)
		}
	}
	_, err = incus.New(dead, incus.WithSocketSetting("SOCKET=", "unset SOCKET")).Server(ctx)
	assertUnavailable(t, err)
}

func TestDefaultSocketFollowsEnvironment(t *testing.T) {
	t.Setenv("INCUS_SOCKET", "/run/elsewhere.socket")
	if got := incus.DefaultSocket(); got != "/run/elsewhere.socket" {
		t.Errorf("DefaultSocket() = %q with INCUS_SOCKET set", got)
	}
	if got := incus.New("").Socket(); got != "/run/elsewhere.socket" {
		t.Errorf("New(\"\").Socket() = %q with INCUS_SOCKET set", got)
	}
	t.Setenv("INCUS_SOCKET", "")
	if got := incus.DefaultSocket(); got != incus.DefaultSocketPath {
		t.Errorf("DefaultSocket() = %q without INCUS_SOCKET", got)
	}
}

func TestServerInfo(t *testing.T) {
	t.Parallel()
	c := incustest.Require(t)
	server, err := c.Server(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if server.APIVersion != "1.0" || server.Environment.ServerVersion == "" {
		t.Errorf("server = %+v, want API 1.0 and a server version", server)
	}
	for _, ext := range []string{"etag", "container_exec_recording", "instance_create_start", "operation_wait"} {
		if !server.HasExtension(ext) {
			t.Errorf("daemon lacks API extension %q that the client relies on", ext)
		}
	}
}

func TestErrorTyping(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	c := incustest.Project(t)

	_, _, err := c.GetInstance(ctx, "nothere")
	if !errors.Is(err, incus.ErrNotFound) {
		t.Errorf("GetInstance of a missing instance: %v, want ErrNotFound", err)
	}
	var apiErr *incus.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Message == "" {
		t.Errorf("GetInstance of a missing instance: %#v, want *incus.Error with status 404 and a message", err)
	}
	if errors.Is(err, incus.ErrConflict) || errors.Is(err, incus.ErrUnavailable) {
		t.Errorf("a 404 matches other sentinels: %v", err)
	}

	err = c.CreateProject(ctx, incus.Project{Name: c.ProjectName()})
	if !errors.Is(err, incus.ErrConflict) {
		t.Errorf("creating an existing project: %v, want ErrConflict", err)
	}
	err = c.DeleteProject(ctx, "isxtest-never-made")
	if !errors.Is(err, incus.ErrNotFound) {
		t.Errorf("deleting a missing project: %v, want ErrNotFound", err)
	}

	// A bad request is neither sentinel but still carries status and text.
	err = c.CreateInstance(ctx, incus.InstanceCreate{Name: "bad", Source: incus.ImageSource(incustest.BusyBox),
		Config: map[string]string{"no.such.key": "1"}})
	var opErr *incus.OperationError
	if !errors.As(err, &opErr) || !strings.Contains(opErr.Message, "no.such.key") ||
		errors.Is(err, incus.ErrNotFound) || errors.Is(err, incus.ErrConflict) {
		t.Errorf("invalid config key: %#v (%+v), want *incus.OperationError naming the key", err, opErr)
	}

	err = c.CreateInstance(ctx, incus.InstanceCreate{Name: "9starts-with-digit", Source: incus.ImageSource(incustest.BusyBox)})
	if err == nil || !strings.Contains(err.Error(), "must start with a letter") {
		t.Errorf("invalid name: %v", err)
	}

	_, err = c.WaitOperation(ctx, "00000000-0000-0000-0000-000000000000")
	if !errors.Is(err, incus.ErrNotFound) {
		t.Errorf("waiting for a missing operation: %v, want ErrNotFound", err)
	}
}

func TestProjects(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	c := incustest.Project(t)
	projects, err := incustest.Client().Projects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var found *incus.Project
	for i := range projects {
		if projects[i].Name == c.ProjectName() {
			found = &projects[i]
		}
	}
	if found == nil {
		t.Fatalf("project %s not listed", c.ProjectName())
	}
	if found.Config["features.images"] != "false" || found.Config[incustest.CreatedKey] == "" {
		t.Errorf("project config = %v", found.Config)
	}
	project, etag, err := incustest.Client().GetProject(ctx, c.ProjectName())
	if err != nil || etag == "" || project.Name != c.ProjectName() {
		t.Errorf("GetProject = %+v, etag %q, %v", project, etag, err)
	}
}
