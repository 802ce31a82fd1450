package instance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os/user"
	"sort"
	"strings"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/incus"
)

// Manager makes, lists and destroys isx instances in one Incus project
// (the project of its client).
type Manager struct {
	Client *incus.Client
	Clock  clock.Clock
	// ProxyDir is the host proxy's directory (config.ProxyDir): instances
	// not airgapped get a proxy device to it. Empty: they get none, and
	// reach nothing through the host proxy.
	ProxyDir string
}

// NewManager returns a Manager on the real clock.
func NewManager(c *incus.Client) *Manager { return &Manager{Client: c, Clock: clock.Real{}} }

// CurrentOwner is the host user that isx stamps as an instance's owner.
func CurrentOwner() (string, error) {
	u, err := user.Current()
	if err != nil {
		return "", fmt.Errorf("finding the host user to stamp as owner: %w", err)
	}
	return u.Username, nil
}

// BranchOptions describe a new instance.
type BranchOptions struct {
	Name string
	// From is a built template, or another isx instance to copy.
	From    string
	Network Network // "" is NetworkDefault
	Owner   string  // the host user; required
	// Config is more config set atomically with the instance, such as
	// isx mcp's stamps. It may not set the stamps Branch writes itself.
	Config map[string]string
	// NoStart leaves the new instance stopped.
	NoStart bool
	// Warm is a warm pool's stopped copy of From (TypeWarm) to take in
	// place of copying From. If another caller took it first, From is
	// copied as usual.
	Warm string
}

// Branch makes a new instance as a copy of a built template (or of another
// isx instance), stamped with its template, owner, creation time and
// network mode, and starts it. A copy of an instance loses that
// instance's MCP stamps. If anything fails after Incus made the instance,
// it is deleted again: nothing is left half-made.
func (m *Manager) Branch(ctx context.Context, opts BranchOptions) error {
	create, err := m.branchRequest(ctx, opts)
	if err != nil {
		return err
	}
	if opts.Warm != "" {
		err = m.takeWarm(ctx, opts.Warm, create)
	} else {
		err = m.Client.CreateInstance(ctx, create)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, incus.ErrConflict):
		// Incus says so with its database's constraint, which tells a
		// person nothing more.
		return NewError(CodeExists, opts.Name, nil, "an instance named %s already exists in project %s; choose another name or `isx destroy %s` first", opts.Name, m.project(), opts.Name)
	case busyCreating(err):
		// Another caller is making an instance of this very name right
		// now: the name is taken, and the instance is not ours to remove.
		return NewError(CodeExists, opts.Name, err, "an instance named %s is being made in project %s by another caller right now", opts.Name, m.project())
	case errors.Is(err, incus.ErrUnavailable):
		return err
	}
	failed := NewError(CodeBranchFailed, opts.Name, err, "making %s from %s failed", opts.Name, opts.From)
	if cleanupErr := m.removeHalfMade(ctx, opts.Name); cleanupErr != nil {
		return errors.Join(failed, cleanupErr)
	}
	return failed
}

// takeWarm makes create out of a warm copy: renamed first (Incus renames
// only a stopped instance, and of two callers renaming one copy exactly
// one succeeds), then given the config and devices create would have,
// then started. The config leaves out Incus's volatile keys, which the
// copy has of its own, and removes the pool's stamps.
func (m *Manager) takeWarm(ctx context.Context, warm string, create incus.InstanceCreate) error {
	err := m.Client.RenameInstance(ctx, warm, create.Name)
	if errors.Is(err, incus.ErrNotFound) {
		return m.Client.CreateInstance(ctx, create)
	}
	if err != nil {
		return err
	}
	config := map[string]string{KeyWarm: "", KeyWarmFilling: ""}
	for key, value := range create.Config {
		if !strings.HasPrefix(key, "volatile.") {
			config[key] = value
		}
	}
	if err := m.Client.PatchInstance(ctx, create.Name, "", incus.InstancePatch{Config: config, Devices: create.Devices}); err != nil {
		return err
	}
	if !create.Start {
		return nil
	}
	return m.Client.StartInstance(ctx, create.Name)
}

// busyCreating recognises Incus refusing a create because an instance of
// that name is being worked on right now: being created, or, once the
// other caller's create is done, started (Incus quotes the operation:
// `Instance is busy running a "create" operation`, or "start"). Either way
// the name is another caller's; only matching "create" once took the
// refusal for a failed create of our own and removed the other's instance.
func busyCreating(err error) bool {
	return err != nil && strings.Contains(err.Error(), "is busy running a")
}

func (m *Manager) branchRequest(ctx context.Context, opts BranchOptions) (incus.InstanceCreate, error) {
	if err := incus.ValidateInstanceName(opts.Name); err != nil {
		return incus.InstanceCreate{}, NewError(CodeInvalid, opts.Name, nil, "%s", err.Error())
	}
	if opts.Owner == "" {
		return incus.InstanceCreate{}, NewError(CodeInvalid, opts.Name, nil, "no owner given for the new instance")
	}
	network, err := ParseNetwork(string(opts.Network))
	if err != nil {
		return incus.InstanceCreate{}, err
	}
	for key := range opts.Config {
		if ownStamps[key] {
			return incus.InstanceCreate{}, NewError(CodeInvalid, opts.Name, nil, "%s is stamped by Branch itself and may not be given", key)
		}
	}
	source, err := m.source(ctx, opts.From)
	if err != nil {
		return incus.InstanceCreate{}, err
	}
	stamps := ParseStamps(source.Config)
	tpl := stamps.Template
	if stamps.IsTemplate() && tpl == "" {
		tpl = source.Name
	}
	config := ClearMCP(source.Config)
	// No coordinator makes another: a copy never keeps the grant.
	delete(config, KeyCoordinator)
	maps.Copy(config, opts.Config)
	maps.Copy(config, map[string]string{
		KeyType:     TypeInstance,
		KeyTemplate: tpl,
		KeyOwner:    opts.Owner,
		KeyCreated:  FormatTime(m.Clock.Now()),
		KeyNetwork:  string(network),
	})
	maps.Copy(config, proxyEnvironment(network, m.ProxyDir))
	devices, err := networkDevices(network, m.ProxyDir, m.Client.ProjectName(), opts.Name, source.ExpandedDevices)
	if err != nil {
		return incus.InstanceCreate{}, err
	}
	return incus.InstanceCreate{
		Name:    opts.Name,
		Source:  incus.CopySource(source.Name, true),
		Config:  config,
		Devices: devices,
		Start:   !opts.NoStart,
	}, nil
}

// ownStamps are the keys Branch decides.
var ownStamps = map[string]bool{KeyType: true, KeyTemplate: true, KeyOwner: true, KeyCreated: true, KeyNetwork: true, KeyCoordinator: true}

// source reads what a branch copies and checks isx made it.
func (m *Manager) source(ctx context.Context, name string) (*incus.Instance, error) {
	inst, _, err := m.Client.GetInstance(ctx, name)
	if errors.Is(err, incus.ErrNotFound) {
		return nil, NewError(CodeNotBuilt, name, err, "there is no built template or instance named %s in project %s; if it is a template, run `isx build %s` first", name, m.project(), name)
	}
	if err != nil {
		return nil, err
	}
	if !ParseStamps(inst.Config).Managed() {
		return nil, NewError(CodeNotManaged, name, nil, "%s was not made by isx (it has no %s stamp), so isx does not branch from it; build a template with `isx build`", name, KeyType)
	}
	return inst, nil
}

// removeHalfMade deletes an instance Branch's create made before failing
// (a start can fail after the copy succeeded).
func (m *Manager) removeHalfMade(ctx context.Context, name string) error {
	cleanup := context.WithoutCancel(ctx)
	err := m.Client.DeleteInstance(cleanup, name, true)
	if err == nil || errors.Is(err, incus.ErrNotFound) {
		return nil
	}
	return fmt.Errorf("removing the half-made instance %s (delete it with `incus delete --force %s`): %w", name, name, err)
}

func (m *Manager) project() string {
	if p := m.Client.ProjectName(); p != "" {
		return p
	}
	return "default"
}

// Entry is one instance as `isx list` sees it.
type Entry struct {
	Name   string
	Status string // as Incus says: Running, Stopped …
	Stamps Stamps
	// Instance is what Incus returned, for callers needing more.
	Instance *incus.Instance
}

// List returns every instance of the project with its stamps, sorted by
// name, in one request to Incus. Instances isx did not make are included;
// Stamps.Managed tells them apart.
func (m *Manager) List(ctx context.Context) ([]Entry, error) {
	instances, err := m.Client.Instances(ctx)
	if err != nil {
		return nil, err
	}
	return entries(instances), nil
}

// ListWithState is List with each instance's live state (its addresses,
// processes, memory), which costs Incus more.
func (m *Manager) ListWithState(ctx context.Context) ([]Entry, error) {
	instances, err := m.Client.InstancesWithState(ctx)
	if err != nil {
		return nil, err
	}
	return entries(instances), nil
}

func entries(instances []incus.Instance) []Entry {
	entries := make([]Entry, 0, len(instances))
	for i := range instances {
		inst := &instances[i]
		entries = append(entries, Entry{Name: inst.Name, Status: inst.Status, Stamps: ParseStamps(inst.Config), Instance: inst})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	return entries
}

// DestroyOptions say what Destroy may delete.
type DestroyOptions struct {
	// Template allows destroying a built template. Instances branched
	// from it are independent copies and stay.
	Template bool
	// Force allows destroying a running instance, which is stopped first;
	// without it a running instance is refused, as `incus delete` does.
	Force bool
}

// Destroy deletes an isx instance. It refuses an unknown name, an instance
// isx did not make, a built template unless opts.Template says so, and a
// running instance unless opts.Force says so (then it is stopped first).
func (m *Manager) Destroy(ctx context.Context, name string, opts DestroyOptions) error {
	inst, _, err := m.Client.GetInstance(ctx, name)
	if errors.Is(err, incus.ErrNotFound) {
		return NewError(CodeNotFound, name, nil, "there is no instance named %s in project %s; `isx list` shows the instances there are", name, m.project())
	}
	if err != nil {
		return err
	}
	stamps := ParseStamps(inst.Config)
	switch {
	case !stamps.Managed():
		return NewError(CodeNotManaged, name, nil, "%s was not made by isx (it has no %s stamp), so isx leaves it alone; delete it with `incus delete` if you mean to", name, KeyType)
	case stamps.IsTemplate() && !opts.Template:
		return NewError(CodeIsTemplate, name, nil, "%s is a built template; to destroy it, say so with `isx destroy --template %s` (instances branched from it stay)", name, name)
	case inst.Running() && !opts.Force:
		return NewError(CodeRunning, name, nil, "%s is running; `isx destroy --force %s` stops and destroys it", name, name)
	}
	if err := m.Client.DeleteInstance(ctx, name, true); err != nil && !errors.Is(err, incus.ErrNotFound) {
		return err
	}
	return nil
}
