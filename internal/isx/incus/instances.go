package incus

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"time"
)

// Instance status words as Incus reports them in Instance.Status.
const (
	StatusRunning = "Running"
	StatusStopped = "Stopped"
	StatusFrozen  = "Frozen"
	StatusError   = "Error"
)

// DefaultStopTimeout is how long a clean shutdown may take when
// StopOptions sets neither Force nor Timeout.
const DefaultStopTimeout = 30 * time.Second

// Instance is a container (or VM) with its own config, as GET
// /1.0/instances/<name> returns it. Config holds the instance's own keys,
// including isx's user.isx.* stamps; Expanded* include its profiles.
type Instance struct {
	Name            string                       `json:"name"`
	Project         string                       `json:"project"`
	Type            string                       `json:"type"`
	Description     string                       `json:"description"`
	Architecture    string                       `json:"architecture"`
	Config          map[string]string            `json:"config"`
	Devices         map[string]map[string]string `json:"devices"`
	Profiles        []string                     `json:"profiles"`
	Ephemeral       bool                         `json:"ephemeral"`
	Stateful        bool                         `json:"stateful"`
	ExpandedConfig  map[string]string            `json:"expanded_config"`
	ExpandedDevices map[string]map[string]string `json:"expanded_devices"`
	Status          string                       `json:"status"`
	StatusCode      int                          `json:"status_code"`
	Location        string                       `json:"location"`
	CreatedAt       time.Time                    `json:"created_at"`
	LastUsedAt      time.Time                    `json:"last_used_at"`
	// State is filled only by InstancesWithState.
	State *InstanceState `json:"state,omitempty"`
}

// Running reports whether the instance was running when read.
func (i *Instance) Running() bool { return i.Status == StatusRunning }

// clone copies the instance deeply enough that mutating the copy's maps and
// slices leaves the original alone.
func (i *Instance) clone() *Instance {
	c := *i
	c.Config = maps.Clone(i.Config)
	c.Devices = cloneDevices(i.Devices)
	c.Profiles = slices.Clone(i.Profiles)
	c.ExpandedConfig = maps.Clone(i.ExpandedConfig)
	c.ExpandedDevices = cloneDevices(i.ExpandedDevices)
	return &c
}

func cloneDevices(devices map[string]map[string]string) map[string]map[string]string {
	if devices == nil {
		return nil
	}
	out := make(map[string]map[string]string, len(devices))
	for name, device := range devices {
		out[name] = maps.Clone(device)
	}
	return out
}

// InstanceState is the live state of an instance.
type InstanceState struct {
	Status     string `json:"status"`
	StatusCode int    `json:"status_code"`
	Pid        int64  `json:"pid"`
	Processes  int64  `json:"processes"`
	Memory     struct {
		Usage     int64 `json:"usage"`
		UsagePeak int64 `json:"usage_peak"`
	} `json:"memory"`
	CPU struct {
		Usage int64 `json:"usage"`
	} `json:"cpu"`
	// Network is each interface inside the instance, by name (lo included).
	Network map[string]NetworkState `json:"network"`
}

// NetworkState is one network interface inside an instance.
type NetworkState struct {
	Addresses []NetworkAddress `json:"addresses"`
	HostName  string           `json:"host_name"`
	State     string           `json:"state"`
	Type      string           `json:"type"`
}

// NetworkAddress is an address of an interface: Family "inet" or "inet6",
// Scope "global", "link" or "local".
type NetworkAddress struct {
	Family  string `json:"family"`
	Address string `json:"address"`
	Netmask string `json:"netmask"`
	Scope   string `json:"scope"`
}

// Instances lists the project's instances with their config and status.
func (c *Client) Instances(ctx context.Context) ([]Instance, error) {
	return c.listInstances(ctx, "1")
}

// InstancesByName lists the project's instances as Instances does, by
// name: what a caller that looks up many names reads once.
func (c *Client) InstancesByName(ctx context.Context) (map[string]*Instance, error) {
	list, err := c.Instances(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*Instance, len(list))
	for i := range list {
		out[list[i].Name] = &list[i]
	}
	return out, nil
}

// InstancesWithState lists the project's instances with config and live
// state (processes, memory). It costs the daemon more than Instances.
func (c *Client) InstancesWithState(ctx context.Context) ([]Instance, error) {
	return c.listInstances(ctx, "2")
}

func (c *Client) listInstances(ctx context.Context, recursion string) ([]Instance, error) {
	var instances []Instance
	r := request{method: "GET", path: apiPath("instances"), query: url.Values{"recursion": {recursion}}}
	if _, err := c.get(ctx, r, &instances); err != nil {
		return nil, fmt.Errorf("listing instances: %w", err)
	}
	return instances, nil
}

// GetInstance returns the instance and the ETag that guards writes to it.
func (c *Client) GetInstance(ctx context.Context, name string) (*Instance, string, error) {
	var inst Instance
	etag, err := c.get(ctx, request{method: "GET", path: apiPath("instances", name)}, &inst)
	if err != nil {
		return nil, "", fmt.Errorf("getting instance %q: %w", name, err)
	}
	return &inst, etag, nil
}

// GetInstanceState returns the live state of one instance.
func (c *Client) GetInstanceState(ctx context.Context, name string) (*InstanceState, error) {
	var state InstanceState
	if _, err := c.get(ctx, request{method: "GET", path: apiPath("instances", name, "state")}, &state); err != nil {
		return nil, fmt.Errorf("getting state of instance %q: %w", name, err)
	}
	return &state, nil
}

// InstanceSource says what a new instance starts from.
type InstanceSource struct {
	Type         string `json:"type"`
	Alias        string `json:"alias,omitempty"`
	Fingerprint  string `json:"fingerprint,omitempty"`
	Source       string `json:"source,omitempty"`
	InstanceOnly bool   `json:"instance_only,omitempty"`
	Project      string `json:"project,omitempty"`
}

// ImageSource starts from a local image known by its alias.
func ImageSource(alias string) InstanceSource { return InstanceSource{Type: "image", Alias: alias} }

// CopySource copies another instance of the same project; instanceOnly
// leaves its snapshots behind.
func CopySource(instance string, instanceOnly bool) InstanceSource {
	return InstanceSource{Type: "copy", Source: instance, InstanceOnly: instanceOnly}
}

// InstanceCreate describes a new instance.
type InstanceCreate struct {
	Name        string
	Type        string // "container" when empty
	Source      InstanceSource
	Description string
	// Config is merged over a copied instance's config; a key set to ""
	// there removes it.
	Config  map[string]string
	Devices map[string]map[string]string
	// Profiles nil applies the project's default profile; an empty,
	// non-nil slice applies none.
	Profiles  []string
	Ephemeral bool
	Start     bool // start it once created
}

// CreateInstance creates the instance and waits until it exists (and runs,
// with Start). A name in use is ErrConflict.
func (c *Client) CreateInstance(ctx context.Context, create InstanceCreate) error {
	if err := ValidateInstanceName(create.Name); err != nil {
		return err
	}
	kind := create.Type
	if kind == "" {
		kind = "container"
	}
	body := map[string]any{
		"name":      create.Name,
		"type":      kind,
		"source":    create.Source,
		"ephemeral": create.Ephemeral,
		"start":     create.Start,
	}
	if create.Description != "" {
		body["description"] = create.Description
	}
	if create.Config != nil {
		body["config"] = create.Config
	}
	if create.Devices != nil {
		body["devices"] = create.Devices
	}
	if create.Profiles != nil {
		body["profiles"] = create.Profiles
	}
	if _, err := c.run(ctx, request{method: "POST", path: apiPath("instances"), body: body}); err != nil {
		return fmt.Errorf("creating instance %q: %w", create.Name, err)
	}
	return nil
}

// ValidateInstanceName checks Incus's rule for instance names (a hostname
// label: 1-63 letters, digits and hyphens, starting with a letter, not
// ending with a hyphen) before anything is sent.
func ValidateInstanceName(name string) error {
	bad := func(why string) error {
		return fmt.Errorf("invalid instance name %q: %s", name, why)
	}
	switch {
	case name == "":
		return bad("it is empty")
	case len(name) > 63:
		return bad("it is longer than 63 characters")
	case !isLetter(name[0]):
		return bad("it must start with a letter")
	case name[len(name)-1] == '-':
		return bad("it must not end with a hyphen")
	}
	for i := 0; i < len(name); i++ {
		if ch := name[i]; !isLetter(ch) && !(ch >= '0' && ch <= '9') && ch != '-' {
			return bad("only letters, digits and hyphens are allowed")
		}
	}
	return nil
}

func isLetter(ch byte) bool { return ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' }

// StartInstance starts a stopped instance and waits until it runs.
func (c *Client) StartInstance(ctx context.Context, name string) error {
	return c.changeState(ctx, name, map[string]any{"action": "start"})
}

// StopOptions says how to stop an instance. Force alone kills it at once.
// Timeout alone asks it to shut down cleanly and fails if it has not within
// Timeout. Both: shut down cleanly for up to Timeout, then kill. Neither: a
// clean shutdown within DefaultStopTimeout. (An image without an init that
// handles SIGPWR, like isx/busybox, never shuts down cleanly.)
type StopOptions struct {
	Force   bool
	Timeout time.Duration
}

// StopInstance stops a running instance and waits until it has. An
// instance found stopped after a failed stop is stopped as asked: a
// container whose init exits while Incus stops it fails the stop with
// "container is not running".
func (c *Client) StopInstance(ctx context.Context, name string, opts StopOptions) error {
	err := c.stopOrRestart(ctx, name, "stop", opts)
	if err == nil || errors.Is(err, ErrNotFound) {
		return err
	}
	if inst, _, getErr := c.GetInstance(ctx, name); getErr == nil && inst.Status == StatusStopped {
		return nil
	}
	return err
}

// RestartInstance restarts a running instance, stopping it as opts say.
func (c *Client) RestartInstance(ctx context.Context, name string, opts StopOptions) error {
	return c.stopOrRestart(ctx, name, "restart", opts)
}

func (c *Client) stopOrRestart(ctx context.Context, name, action string, opts StopOptions) error {
	if opts.Force && opts.Timeout <= 0 {
		return c.changeState(ctx, name, map[string]any{"action": action, "force": true})
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultStopTimeout
	}
	seconds := int((timeout + time.Second - 1) / time.Second)
	err := c.changeState(ctx, name, map[string]any{"action": action, "timeout": seconds})
	var opErr *OperationError
	if err != nil && opts.Force && errors.As(err, &opErr) {
		return c.changeState(ctx, name, map[string]any{"action": action, "force": true})
	}
	return err
}

func (c *Client) changeState(ctx context.Context, name string, body map[string]any) error {
	r := request{method: "PUT", path: apiPath("instances", name, "state"), body: body}
	if _, err := c.run(ctx, r); err != nil {
		return fmt.Errorf("%s instance %q: %w", body["action"], name, err)
	}
	return nil
}

// RenameInstance renames a stopped instance; a name in use is ErrConflict.
func (c *Client) RenameInstance(ctx context.Context, name, newName string) error {
	if err := ValidateInstanceName(newName); err != nil {
		return err
	}
	r := request{method: "POST", path: apiPath("instances", name), body: map[string]string{"name": newName}}
	if _, err := c.run(ctx, r); err != nil {
		return fmt.Errorf("renaming instance %q to %q: %w", name, newName, err)
	}
	return nil
}

// DeleteInstance deletes an instance. With force a running instance is
// killed first; without, deleting a running instance fails.
func (c *Client) DeleteInstance(ctx context.Context, name string, force bool) error {
	if force {
		err := c.StopInstance(ctx, name, StopOptions{Force: true})
		if errors.Is(err, ErrNotFound) {
			return err
		}
		// Any other stop failure (typically: already stopped) is left for
		// the delete to report if it matters.
	}
	if _, err := c.run(ctx, request{method: "DELETE", path: apiPath("instances", name)}); err != nil {
		return fmt.Errorf("deleting instance %q: %w", name, err)
	}
	return nil
}
