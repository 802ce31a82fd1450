package incus_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
)

func createStopped(t *testing.T, c *incus.Client, name string, config map[string]string) {
	t.Helper()
	incustest.EnsureImages(t, incustest.BusyBox)
	err := c.CreateInstance(testContext(t), incus.InstanceCreate{Name: name, Source: incus.ImageSource(incustest.BusyBox), Config: config})
	if err != nil {
		t.Fatal(err)
	}
}

func configOf(t *testing.T, c *incus.Client, name string) map[string]string {
	t.Helper()
	inst, _, err := c.GetInstance(testContext(t), name)
	if err != nil {
		t.Fatal(err)
	}
	return inst.Config
}

// raceStamps has writers PATCH a stamp concurrently, all guarded by the same
// ETag, and returns each writer's error. Every value is new: a write that
// changes nothing leaves the ETag as it was, so it would not conflict.
func raceStamps(t *testing.T, c *incus.Client, name, etag string, round, writers int) []error {
	t.Helper()
	ctx := testContext(t)
	errs := make([]error, writers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			<-start
			errs[i] = c.PatchInstance(ctx, name, etag, incus.InstancePatch{
				Config: map[string]string{"user.isx.mcp-session": fmt.Sprintf("session-%d-%d", round, i)},
			})
		})
	}
	close(start)
	wg.Wait()
	return errs
}

// Mark, re-read, act (the basis of adopt and destroy racing safely,
// ISX-052, ISX-055): of concurrent stamp writes from one stale ETag exactly
// one wins and every other gets ErrConflict.
func TestConcurrentStampWritesFromOneETagISX052(t *testing.T) {
	t.Parallel()
	c := incustest.Project(t)
	createStopped(t, c, "held", map[string]string{"user.isx.mcp-session": "orphan"})
	for round, writers := range []int{2, 2, 2, 2, 2, 8} {
		_, etag, err := c.GetInstance(testContext(t), "held")
		if err != nil {
			t.Fatal(err)
		}
		errs := raceStamps(t, c, "held", etag, round, writers)
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: writers %d and %d both won from one ETag", round, winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, incus.ErrConflict):
				t.Fatalf("round %d: writer %d: %v, want ErrConflict", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no writer won: %v", round, errs)
		}
		if got, want := configOf(t, c, "held")["user.isx.mcp-session"], fmt.Sprintf("session-%d-%d", round, winner); got != want {
			t.Fatalf("round %d: stamp = %q, want the winner's %q", round, got, want)
		}
	}
}

func TestStaleETagIsConflict(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	c := incustest.Project(t)
	createStopped(t, c, "web", map[string]string{"user.isx.owner": "alice"})
	inst, stale, err := c.GetInstance(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.PatchInstance(ctx, "web", "", incus.InstancePatch{Config: map[string]string{"user.isx.kept": "true"}}); err != nil {
		t.Fatalf("an unguarded patch: %v", err)
	}

	err = c.PatchInstance(ctx, "web", stale, incus.InstancePatch{Config: map[string]string{"user.isx.owner": "bob"}})
	if !errors.Is(err, incus.ErrConflict) {
		t.Errorf("PATCH with a stale ETag: %v, want ErrConflict", err)
	}
	var apiErr *incus.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 412 {
		t.Errorf("PATCH with a stale ETag: %#v, want *incus.Error 412", err)
	}
	inst.Config["user.isx.owner"] = "bob"
	if err := c.PutInstance(ctx, "web", stale, inst); !errors.Is(err, incus.ErrConflict) {
		t.Errorf("PUT with a stale ETag: %v, want ErrConflict", err)
	}
	err = c.UpdateInstanceFrom(ctx, inst, stale, func(i *incus.Instance) error {
		i.Config["user.isx.owner"] = "carol"
		return nil
	})
	if !errors.Is(err, incus.ErrConflict) {
		t.Errorf("UpdateInstanceFrom with a stale read: %v, want ErrConflict", err)
	}
	if got := configOf(t, c, "web")["user.isx.owner"]; got != "alice" {
		t.Errorf("a refused write changed the stamp to %q", got)
	}

	_, fresh, err := c.GetInstance(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.PatchInstance(ctx, "web", fresh, incus.InstancePatch{Config: map[string]string{"user.isx.owner": "dave"}}); err != nil {
		t.Errorf("PATCH with a fresh ETag: %v", err)
	}
	if got := configOf(t, c, "web")["user.isx.owner"]; got != "dave" {
		t.Errorf("stamp = %q after a fresh write", got)
	}
}

// UpdateInstance must not write when the instance changed between its read
// and its write; here the change happens inside mutate, i.e. in that window.
func TestUpdateInstanceDetectsRace(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	c := incustest.Project(t)
	createStopped(t, c, "web", nil)
	err := c.UpdateInstance(ctx, "web", func(i *incus.Instance) error {
		if err := c.PatchInstance(ctx, "web", "", incus.InstancePatch{Config: map[string]string{"user.isx.mcp-session": "other"}}); err != nil {
			return err
		}
		i.Config["user.isx.mcp-session"] = "mine"
		return nil
	})
	if !errors.Is(err, incus.ErrConflict) {
		t.Fatalf("UpdateInstance racing another writer: %v, want ErrConflict", err)
	}
	if got := configOf(t, c, "web")["user.isx.mcp-session"]; got != "other" {
		t.Errorf("stamp = %q, want the other writer's", got)
	}

	abort := errors.New("changed my mind")
	if err := c.UpdateInstance(ctx, "web", func(*incus.Instance) error { return abort }); !errors.Is(err, abort) {
		t.Errorf("mutate's error: %v", err)
	}
	if err := c.UpdateInstance(context.Background(), "missing", func(*incus.Instance) error { return nil }); !errors.Is(err, incus.ErrNotFound) {
		t.Errorf("UpdateInstance of a missing instance: %v", err)
	}
}

func TestUpdateInstanceWrites(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	c := incustest.Project(t)
	createStopped(t, c, "web", map[string]string{"user.isx.type": "instance", "user.isx.mcp-kept": "true"})

	err := c.UpdateInstance(ctx, "web", func(i *incus.Instance) error {
		i.Config["user.isx.mcp-session"] = "s1"
		delete(i.Config, "user.isx.mcp-kept")
		i.Devices = map[string]map[string]string{"isx-null": {"type": "unix-char", "source": "/dev/null", "path": "/dev/isx-null"}}
		i.Description = "held by s1"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	inst, etag, err := c.GetInstance(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	if _, kept := inst.Config["user.isx.mcp-kept"]; kept || inst.Config["user.isx.mcp-session"] != "s1" ||
		inst.Config["user.isx.type"] != "instance" || inst.Devices["isx-null"] == nil || inst.Description != "held by s1" {
		t.Fatalf("after update: config %v devices %v description %q", inst.Config, inst.Devices, inst.Description)
	}

	// Removing a device can only be written with PUT, still ETag-guarded.
	err = c.UpdateInstanceFrom(ctx, inst, etag, func(i *incus.Instance) error {
		delete(i.Devices, "isx-null")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	inst, etag, err = c.GetInstance(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	if len(inst.Devices) != 0 || inst.Config["user.isx.mcp-session"] != "s1" {
		t.Errorf("after removing the device: devices %v config %v", inst.Devices, inst.Config)
	}

	// Nothing changed: nothing is written, so the ETag stays valid.
	if err := c.UpdateInstanceFrom(ctx, inst, etag, func(*incus.Instance) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := c.PatchInstance(ctx, "web", etag, incus.InstancePatch{Config: map[string]string{"user.isx.mcp-orphaned": "x"}}); err != nil {
		t.Errorf("the ETag went stale after an empty update: %v", err)
	}
}
