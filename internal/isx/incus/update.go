package incus

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// Writes to an instance's config are guarded by the ETag of the read they
// are based on (If-Match). Incus 6.0 checks If-Match on both PUT and PATCH of
// /1.0/instances/<name>, but only PATCH checks and writes under the
// instance's lock: of concurrent PATCHes from one ETag exactly one wins and
// the rest get 412 (ErrConflict), while concurrent PUTs from one ETag can all
// pass the check before any of them is applied. So the writes here use PATCH
// whenever the change can be expressed as one (config keys set or removed,
// devices added or replaced, profiles, description, ephemeral) and PUT only
// to remove a device.
//
// Deleting, renaming and changing the state of an instance ignore If-Match.
// To act only on an instance nobody else claimed, mark it with a guarded
// PatchInstance, re-read it to see the mark is still yours, then act.
// A write that changes nothing leaves the ETag as it was, so two writers of
// the same value both succeed.

// InstancePatch is a partial update: only the fields set are changed.
type InstancePatch struct {
	// Config keys to set; a key set to "" is removed.
	Config map[string]string
	// Devices to add or replace, whole. Removing a device needs PutInstance.
	Devices map[string]map[string]string
	// Profiles replaces the profile list when not nil.
	Profiles    []string
	Description *string
	Ephemeral   *bool
}

// MarshalJSON sends only the fields that are set, so PATCH leaves the rest.
func (p InstancePatch) MarshalJSON() ([]byte, error) {
	body := map[string]any{}
	if p.Config != nil {
		body["config"] = p.Config
	}
	if p.Devices != nil {
		body["devices"] = p.Devices
	}
	if p.Profiles != nil {
		body["profiles"] = p.Profiles
	}
	if p.Description != nil {
		body["description"] = *p.Description
	}
	if p.Ephemeral != nil {
		body["ephemeral"] = *p.Ephemeral
	}
	return json.Marshal(body)
}

func (p InstancePatch) empty() bool {
	return len(p.Config) == 0 && len(p.Devices) == 0 && p.Profiles == nil && p.Description == nil && p.Ephemeral == nil
}

// PatchInstance applies a partial update. With a non-empty etag it applies
// only if the instance is unchanged since the read that gave the etag;
// otherwise it returns ErrConflict. This is the atomic compare-and-set the
// "mark, re-read, act" pattern is built on.
func (c *Client) PatchInstance(ctx context.Context, name, etag string, patch InstancePatch) error {
	r := request{method: "PATCH", path: apiPath("instances", name), body: patch, etag: etag}
	if _, err := c.run(ctx, r); err != nil {
		return fmt.Errorf("updating instance %q: %w", name, err)
	}
	return nil
}

// PutInstance replaces the instance's writable fields (config, devices,
// profiles, description, ephemeral) with inst's, if etag (when not empty)
// still matches, and waits for the update. See the note above: concurrent
// PUTs are not serialised by Incus 6.0; prefer PatchInstance.
func (c *Client) PutInstance(ctx context.Context, name, etag string, inst *Instance) error {
	body := map[string]any{
		"architecture": inst.Architecture,
		"config":       nonNilMap(inst.Config),
		"devices":      nonNilDevices(inst.Devices),
		"profiles":     nonNilSlice(inst.Profiles),
		"description":  inst.Description,
		"ephemeral":    inst.Ephemeral,
		"stateful":     inst.Stateful,
	}
	r := request{method: "PUT", path: apiPath("instances", name), body: body, etag: etag}
	if _, err := c.run(ctx, r); err != nil {
		return fmt.Errorf("replacing config of instance %q: %w", name, err)
	}
	return nil
}

// UpdateInstance reads the instance, lets mutate change a copy, and writes
// the difference guarded by the read's ETag. If the instance changed in
// between, it returns ErrConflict and writes nothing: re-read and decide
// again. mutate returning an error aborts with that error.
func (c *Client) UpdateInstance(ctx context.Context, name string, mutate func(*Instance) error) error {
	inst, etag, err := c.GetInstance(ctx, name)
	if err != nil {
		return err
	}
	return c.UpdateInstanceFrom(ctx, inst, etag, mutate)
}

// UpdateInstanceFrom is UpdateInstance for an instance the caller has
// already read (with GetInstance): the write succeeds only if the instance is
// still exactly as read.
func (c *Client) UpdateInstanceFrom(ctx context.Context, read *Instance, etag string, mutate func(*Instance) error) error {
	if etag == "" {
		return fmt.Errorf("updating instance %q: an ETag from GetInstance is required", read.Name)
	}
	changed := read.clone()
	if err := mutate(changed); err != nil {
		return err
	}
	patch, needsPut := diffInstance(read, changed)
	switch {
	case needsPut:
		return c.PutInstance(ctx, read.Name, etag, changed)
	case patch.empty():
		return nil
	}
	return c.PatchInstance(ctx, read.Name, etag, patch)
}

// diffInstance expresses the change from before to after as a patch, or
// reports that only a PUT can express it (a device was removed).
func diffInstance(before, after *Instance) (InstancePatch, bool) {
	var patch InstancePatch
	for key, value := range after.Config {
		if old, ok := before.Config[key]; !ok || old != value {
			setKey(&patch.Config, key, value)
		}
	}
	for key := range before.Config {
		if _, ok := after.Config[key]; !ok {
			setKey(&patch.Config, key, "")
		}
	}
	for name, device := range after.Devices {
		if old, ok := before.Devices[name]; !ok || !maps.Equal(old, device) {
			if patch.Devices == nil {
				patch.Devices = map[string]map[string]string{}
			}
			patch.Devices[name] = device
		}
	}
	if !slices.Equal(before.Profiles, after.Profiles) {
		patch.Profiles = nonNilSlice(after.Profiles)
	}
	if before.Description != after.Description {
		patch.Description = &after.Description
	}
	if before.Ephemeral != after.Ephemeral {
		patch.Ephemeral = &after.Ephemeral
	}
	for name := range before.Devices {
		if _, ok := after.Devices[name]; !ok {
			return patch, true
		}
	}
	return patch, false
}

func setKey(m *map[string]string, key, value string) {
	if *m == nil {
		*m = map[string]string{}
	}
	(*m)[key] = value
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func nonNilDevices(m map[string]map[string]string) map[string]map[string]string {
	if m == nil {
		return map[string]map[string]string{}
	}
	return m
}

func nonNilSlice(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
