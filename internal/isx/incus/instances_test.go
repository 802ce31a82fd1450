package incus_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
)

func instanceNamed(list []incus.Instance, name string) *incus.Instance {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

func TestInstanceLifecycle(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	c := incustest.Project(t)
	incustest.EnsureImages(t, incustest.BusyBox)

	err := c.CreateInstance(ctx, incus.InstanceCreate{
		Name:        "alpha",
		Source:      incus.ImageSource(incustest.BusyBox),
		Description: "lifecycle test",
		Config:      map[string]string{"user.isx.type": "base", "limits.processes": "500"},
		Devices:     map[string]map[string]string{"isx-null": {"type": "unix-char", "source": "/dev/null", "path": "/dev/isx-null"}},
		Profiles:    []string{"default"},
	})
	if err != nil {
		t.Fatal(err)
	}
	inst, etag, err := c.GetInstance(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if etag == "" || inst.Status != incus.StatusStopped || inst.Running() || inst.Description != "lifecycle test" ||
		inst.Config["user.isx.type"] != "base" || inst.Devices["isx-null"]["path"] != "/dev/isx-null" ||
		!slices.Equal(inst.Profiles, []string{"default"}) || inst.ExpandedDevices["root"]["pool"] == "" ||
		inst.Project != c.ProjectName() || inst.Type != "container" {
		t.Fatalf("created instance = %+v (etag %q)", inst, etag)
	}

	if err := c.CreateInstance(ctx, incus.InstanceCreate{Name: "alpha", Source: incus.ImageSource(incustest.BusyBox)}); !errors.Is(err, incus.ErrConflict) {
		t.Errorf("creating a second alpha: %v, want ErrConflict", err)
	}

	if err := c.StartInstance(ctx, "alpha"); err != nil {
		t.Fatal(err)
	}
	list, err := c.Instances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := instanceNamed(list, "alpha"); got == nil || !got.Running() || got.Config["user.isx.type"] != "base" || got.State != nil {
		t.Errorf("Instances() alpha = %+v", got)
	}
	list, err = c.InstancesWithState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := instanceNamed(list, "alpha"); got == nil || got.State == nil || got.State.Pid <= 0 || got.State.Processes <= 0 {
		t.Errorf("InstancesWithState() alpha = %+v", got)
	}
	state, err := c.GetInstanceState(ctx, "alpha")
	if err != nil || state.Status != incus.StatusRunning {
		t.Errorf("GetInstanceState = %+v, %v", state, err)
	}
	res, err := c.Exec(ctx, "alpha", incus.ExecRequest{Command: []string{"test", "-c", "/dev/isx-null"}})
	if err != nil || res.ExitCode != 0 {
		t.Errorf("the unix-char device is missing in the instance: %+v, %v", res, err)
	}

	if err := c.RestartInstance(ctx, "alpha", incus.StopOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteInstance(ctx, "alpha", false); err == nil {
		t.Fatal("deleting a running instance without force succeeded")
	}
	// busybox's init ignores the shutdown signal: a clean stop times out …
	err = c.StopInstance(ctx, "alpha", incus.StopOptions{Timeout: time.Second})
	var opErr *incus.OperationError
	if !errors.As(err, &opErr) {
		t.Fatalf("clean stop of busybox: %v, want an operation error", err)
	}
	// … and a timeout with Force falls back to killing it.
	if err := c.StopInstance(ctx, "alpha", incus.StopOptions{Timeout: time.Second, Force: true}); err != nil {
		t.Fatal(err)
	}
	if inst, _, err := c.GetInstance(ctx, "alpha"); err != nil || inst.Status != incus.StatusStopped {
		t.Fatalf("after stop: %+v, %v", inst, err)
	}
	// Incus refuses to stop a stopped instance; it is stopped as asked.
	if err := c.StopInstance(ctx, "alpha", incus.StopOptions{Force: true}); err != nil {
		t.Errorf("stopping a stopped instance: %v, want no error", err)
	}

	if err := c.RenameInstance(ctx, "alpha", "beta"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.GetInstance(ctx, "alpha"); !errors.Is(err, incus.ErrNotFound) {
		t.Errorf("old name after rename: %v, want ErrNotFound", err)
	}
	renamed, _, err := c.GetInstance(ctx, "beta")
	if err != nil || renamed.Config["user.isx.type"] != "base" {
		t.Fatalf("renamed instance = %+v, %v", renamed, err)
	}
	if err := c.CreateInstance(ctx, incus.InstanceCreate{Name: "gamma", Source: incus.ImageSource(incustest.BusyBox)}); err != nil {
		t.Fatal(err)
	}
	if err := c.RenameInstance(ctx, "beta", "gamma"); !errors.Is(err, incus.ErrConflict) {
		t.Errorf("renaming onto an existing name: %v, want ErrConflict", err)
	}

	if err := c.DeleteInstance(ctx, "beta", false); err != nil {
		t.Fatal(err)
	}
	if err := c.StartInstance(ctx, "gamma"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteInstance(ctx, "gamma", true); err != nil {
		t.Fatalf("force-deleting a running instance: %v", err)
	}
	if err := c.DeleteInstance(ctx, "gamma", true); !errors.Is(err, incus.ErrNotFound) {
		t.Errorf("deleting a deleted instance: %v, want ErrNotFound", err)
	}
	list, err = c.Instances(ctx)
	if err != nil || len(list) != 0 {
		t.Errorf("instances left: %+v, %v", list, err)
	}
}

func TestCreateWithoutProfiles(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	c := incustest.Project(t)
	incustest.EnsureImages(t, incustest.BusyBox)
	pool, err := rootPool(t, c)
	if err != nil {
		t.Fatal(err)
	}
	// An empty, non-nil profile list means no profile at all, so the root
	// disk must come from the instance's own devices.
	err = c.CreateInstance(ctx, incus.InstanceCreate{
		Name:     "bare",
		Source:   incus.ImageSource(incustest.BusyBox),
		Profiles: []string{},
		Devices:  map[string]map[string]string{"root": {"type": "disk", "path": "/", "pool": pool}},
		Start:    true,
	})
	if err != nil {
		t.Fatal(err)
	}
	inst, _, err := c.GetInstance(ctx, "bare")
	if err != nil || len(inst.Profiles) != 0 || !inst.Running() {
		t.Fatalf("instance without profiles = %+v, %v", inst, err)
	}
}

// rootPool is the pool of the default profile's root disk, as an instance
// made with default settings shows it.
func rootPool(t *testing.T, c *incus.Client) (string, error) {
	t.Helper()
	ctx := testContext(t)
	if err := c.CreateInstance(ctx, incus.InstanceCreate{Name: "probe", Source: incus.ImageSource(incustest.BusyBox)}); err != nil {
		return "", err
	}
	inst, _, err := c.GetInstance(ctx, "probe")
	if err != nil {
		return "", err
	}
	return inst.ExpandedDevices["root"]["pool"], c.DeleteInstance(ctx, "probe", true)
}

func TestCopyInstance(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	c := incustest.Project(t)
	incustest.EnsureImages(t, incustest.BusyBox)
	err := c.CreateInstance(ctx, incus.InstanceCreate{
		Name:   "tpl-src",
		Source: incus.ImageSource(incustest.BusyBox),
		Config: map[string]string{"user.isx.type": "base", "user.isx.template": "src", "user.isx.mcp-session": "s1"},
		Start:  true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.PushFile(ctx, "tpl-src", "/root/marker", strings.NewReader("built"), incus.FileOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.StopInstance(ctx, "tpl-src", incus.StopOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	err = c.CreateInstance(ctx, incus.InstanceCreate{
		Name:   "branch",
		Source: incus.CopySource("tpl-src", true),
		Config: map[string]string{"user.isx.type": "instance", "user.isx.mcp-session": ""},
		Start:  true,
	})
	if err != nil {
		t.Fatal(err)
	}
	branch, _, err := c.GetInstance(ctx, "branch")
	if err != nil {
		t.Fatal(err)
	}
	if !branch.Running() || branch.Config["user.isx.type"] != "instance" || branch.Config["user.isx.template"] != "src" {
		t.Errorf("copy = status %s config %v, want running with the source's stamps and the override", branch.Status, branch.Config)
	}
	if v, ok := branch.Config["user.isx.mcp-session"]; ok && v != "" {
		t.Errorf("copy kept user.isx.mcp-session = %q though the request cleared it", v)
	}
	marker, err := c.PullFile(ctx, "branch", "/root/marker")
	if err != nil || string(marker) != "built" {
		t.Errorf("copied root filesystem: marker = %q, %v", marker, err)
	}
	if err := c.CreateInstance(ctx, incus.InstanceCreate{Name: "orphan", Source: incus.CopySource("no-such-source", true)}); !errors.Is(err, incus.ErrNotFound) {
		t.Errorf("copying a missing instance: %v, want ErrNotFound", err)
	}
}
