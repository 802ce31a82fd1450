package incus

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
)

// These cover the pieces that need no daemon; everything else is tested
// against the real one in the incus_test package.

func TestDiffInstance(t *testing.T) {
	before := &Instance{
		Name:        "web",
		Config:      map[string]string{"user.isx.a": "1", "user.isx.b": "2", "volatile.x": "v"},
		Devices:     map[string]map[string]string{"keep": {"type": "none"}, "change": {"type": "unix-char", "path": "/dev/a"}},
		Profiles:    []string{"default"},
		Description: "old",
	}
	after := before.clone()
	after.Config["user.isx.a"] = "changed"
	delete(after.Config, "user.isx.b")
	after.Config["user.isx.new"] = "3"
	after.Devices["change"]["path"] = "/dev/b"
	after.Devices["added"] = map[string]string{"type": "none"}
	after.Description = "new"
	if before.Config["user.isx.a"] != "1" || before.Devices["change"]["path"] != "/dev/a" {
		t.Fatal("clone shares maps with the original")
	}

	patch, needsPut := diffInstance(before, after)
	if needsPut {
		t.Fatal("no device was removed, yet a PUT is asked for")
	}
	body, err := json.Marshal(patch)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"config":{"user.isx.a":"changed","user.isx.b":"","user.isx.new":"3"},` +
		`"description":"new","devices":{"added":{"type":"none"},"change":{"path":"/dev/b","type":"unix-char"}}}`
	if string(body) != want {
		t.Errorf("patch = %s\nwant    %s", body, want)
	}

	delete(after.Devices, "keep")
	if _, needsPut := diffInstance(before, after); !needsPut {
		t.Error("a removed device must be written with PUT")
	}
	if patch, needsPut := diffInstance(before, before.clone()); needsPut || !patch.empty() {
		t.Errorf("no change gave patch %+v, put %v", patch, needsPut)
	}
	emptied := before.clone()
	emptied.Profiles = nil
	if patch, _ := diffInstance(before, emptied); patch.Profiles == nil || len(patch.Profiles) != 0 {
		t.Errorf("removing all profiles must send an empty list, got %#v", patch.Profiles)
	}
}

func TestErrorMatching(t *testing.T) {
	cases := []struct {
		err                error
		notFound, conflict bool
	}{
		{newError(404, "Instance not found"), true, false},
		{newError(409, "exists"), false, true},
		{newError(412, "ETag doesn't match"), false, true},
		{newError(500, `Failed to create "projects" entry: UNIQUE constraint failed: projects.name`), false, true},
		{NewOperationError("op", "", 400, "Alias already exists"), false, true},
		{NewOperationError("op", "", 404, "Instance not found"), true, false},
		{newError(400, "Invalid value"), false, false},
		{unavailable("/x", socketSetting{}, false, errors.New("refused")), false, false},
	}
	for _, tc := range cases {
		wrapped := fmt.Errorf("doing something: %w", tc.err)
		if errors.Is(wrapped, ErrNotFound) != tc.notFound || errors.Is(wrapped, ErrConflict) != tc.conflict {
			t.Errorf("%v: not found %v, conflict %v; want %v, %v", tc.err,
				errors.Is(wrapped, ErrNotFound), errors.Is(wrapped, ErrConflict), tc.notFound, tc.conflict)
		}
	}
	if !errors.Is(unavailable("/x", socketSetting{}, false, errors.New("refused")), ErrUnavailable) {
		t.Error("unavailableError is not ErrUnavailable")
	}
	if errors.Is(noPermission("/x", errors.New("denied")), ErrUnavailable) {
		t.Error("a permission problem is not something starting the daemon fixes")
	}
}

func TestValidateInstanceName(t *testing.T) {
	for _, good := range []string{"a", "tpl-dev", "mcp-dev-x-abc23", "A1"} {
		if err := ValidateInstanceName(good); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
	for _, bad := range []string{"", "1abc", "-a", "a-", "a_b", "a.b", "a/b", "a b", string(make([]byte, 64))} {
		if err := ValidateInstanceName(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestLifecycleInstance(t *testing.T) {
	for source, want := range map[string]string{
		"/1.0/instances/web?project=p":     "web",
		"/1.0/instances/web":               "web",
		"/1.0/instances/web/snapshots/s1":  "",
		"/1.0/projects/p":                  "",
		"/1.0/instances/we%2Db?project=p":  "we-b",
		"/1.0/operations/123/instances/ab": "",
	} {
		if got := (&LifecycleEvent{Source: source}).Instance(); got != want {
			t.Errorf("Instance() of %q = %q, want %q", source, got, want)
		}
	}
}

func TestRangeTotal(t *testing.T) {
	if n, ok := rangeTotal("bytes 0-99/1234"); !ok || n != 1234 {
		t.Errorf("rangeTotal = %d, %v", n, ok)
	}
	if _, ok := rangeTotal(""); ok {
		t.Error("an absent Content-Range parsed")
	}
	if _, ok := rangeTotal("bytes */*"); ok {
		t.Error("an unknown size parsed")
	}
}

func TestOperationID(t *testing.T) {
	if got := operationID("/1.0/operations/abc-123?project=x"); got != "abc-123" {
		t.Errorf("operationID = %q", got)
	}
}
