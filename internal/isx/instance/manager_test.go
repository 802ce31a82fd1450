package instance_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/incusspawn/isx/internal/isx/instance"
)

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func get(t *testing.T, c *incus.Client, name string) *incus.Instance {
	t.Helper()
	inst, _, err := c.GetInstance(testContext(t), name)
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

func exec(t *testing.T, c *incus.Client, name, script string) string {
	t.Helper()
	res, err := c.Exec(testContext(t), name, incus.ExecRequest{Command: []string{"sh", "-c", script}})
	if err != nil {
		t.Fatal(err)
	}
	return string(res.Stdout)
}

// Branch, List and Destroy on a built busybox template. ISX-036: every
// branch is stamped with its owner; ISX-033: it gets the template's
// defaults (network, tools, source) and nothing chosen per call.
func TestBranchListDestroy(t *testing.T) {
	c := incustest.Project(t)
	ctx := testContext(t)
	buildtest.Build(t, c, buildtest.Templates(t), buildtest.BusyBoxChild)
	now := time.Date(2032, 2, 3, 4, 5, 6, 0, time.UTC)
	m := &instance.Manager{Client: c, Clock: clock.NewFake(now)}

	err := m.Branch(ctx, instance.BranchOptions{Name: "one", From: buildtest.BusyBoxChild, Owner: "alice",
		Config: map[string]string{instance.KeyMCPSession: "s1", instance.KeyMCPPurpose: "#870 implement"}})
	if err != nil {
		t.Fatal(err)
	}
	one := get(t, c, "one")
	s := instance.ParseStamps(one.Config)
	tpl := instance.ParseStamps(get(t, c, buildtest.BusyBoxChild).Config)
	if !one.Running() || s.Type != instance.TypeInstance || s.Template != buildtest.BusyBoxChild || s.Owner != "alice" ||
		!s.Created.Equal(now) || s.Network != instance.NetworkDefault || s.Source != tpl.Source || s.ToolsJSON != tpl.ToolsJSON ||
		s.MCP.Label() != "held: #870 implement" {
		t.Errorf("branch %s: %+v", one.Status, s)
	}
	if got := exec(t, c, "one", "cat /etc/isx-test/child.txt"); got != "written by tpl-test-busybox-child\n" {
		t.Errorf("the branch lacks the template's files: %q", got)
	}

	// A copy of an instance loses its MCP stamps and keeps its template.
	if err := m.Branch(ctx, instance.BranchOptions{Name: "two", From: "one", Owner: "bob", NoStart: true}); err != nil {
		t.Fatal(err)
	}
	two := get(t, c, "two")
	s2 := instance.ParseStamps(two.Config)
	if two.Running() || s2.Template != buildtest.BusyBoxChild || s2.Owner != "bob" || s2.MCP.Any() {
		t.Errorf("copy of an instance: %s %+v", two.Status, s2)
	}

	entries, err := m.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, e := range entries {
		listed = append(listed, e.Name+"="+e.Stamps.Type+"/"+strings.ToLower(e.Status))
	}
	if got := strings.Join(listed, " "); got != "one=instance/running tpl-test-busybox=base/stopped tpl-test-busybox-child=base/stopped two=instance/stopped" {
		t.Errorf("List: %s", got)
	}

	// Refusals.
	refusals := []struct {
		opts instance.BranchOptions
		code string
	}{
		{instance.BranchOptions{Name: "one", From: buildtest.BusyBoxChild, Owner: "alice"}, instance.CodeExists},
		{instance.BranchOptions{Name: "three", From: "tpl-unbuilt", Owner: "alice"}, instance.CodeNotBuilt},
		{instance.BranchOptions{Name: "3bad", From: buildtest.BusyBoxChild, Owner: "alice"}, instance.CodeInvalid},
		{instance.BranchOptions{Name: "three", From: buildtest.BusyBoxChild}, instance.CodeInvalid},
		{instance.BranchOptions{Name: "three", From: buildtest.BusyBoxChild, Owner: "a", Network: "wifi"}, instance.CodeInvalid},
		{instance.BranchOptions{Name: "three", From: buildtest.BusyBoxChild, Owner: "a", Config: map[string]string{instance.KeyOwner: "mallory"}}, instance.CodeInvalid},
	}
	for _, r := range refusals {
		if err := m.Branch(ctx, r.opts); coded.CodeOf(err) != r.code {
			t.Errorf("Branch(%+v) = %v, want code %s", r.opts, err, r.code)
		}
	}
	if err := m.Branch(ctx, instance.BranchOptions{Name: "three", From: "tpl-unbuilt", Owner: "alice"}); !strings.Contains(err.Error(), "isx build tpl-unbuilt") {
		t.Errorf("the refusal for an unbuilt template does not say to run isx build: %v", err)
	}
	if err := m.Branch(ctx, refusals[0].opts); strings.Contains(err.Error(), "UNIQUE") || strings.Contains(err.Error(), "database") ||
		!strings.Contains(err.Error(), "an instance named one already exists in project "+c.ProjectName()) {
		t.Errorf("a taken name: %v", err)
	}
	if got := instance.ParseStamps(get(t, c, "one").Config).Owner; got != "alice" {
		t.Errorf("a refused branch changed the existing instance: owner %q", got)
	}

	// An instance isx did not make is neither a source nor destroyable.
	name := incustest.Launch(t, c, incustest.BusyBox)
	if err := m.Branch(ctx, instance.BranchOptions{Name: "four", From: name, Owner: "alice"}); coded.CodeOf(err) != instance.CodeNotManaged {
		t.Errorf("branch from an unmanaged instance: %v", err)
	}
	if err := m.Destroy(ctx, name, instance.DestroyOptions{Template: true}); coded.CodeOf(err) != instance.CodeNotManaged {
		t.Errorf("destroy of an unmanaged instance: %v", err)
	}

	if err := m.Destroy(ctx, "nowhere", instance.DestroyOptions{}); coded.CodeOf(err) != instance.CodeNotFound {
		t.Errorf("destroy of an unknown name: %v", err)
	}
	if err := m.Destroy(ctx, buildtest.BusyBoxChild, instance.DestroyOptions{}); coded.CodeOf(err) != instance.CodeIsTemplate ||
		!strings.Contains(err.Error(), "--template") {
		t.Errorf("destroy of a template without --template: %v", err)
	}
	// A running instance needs Force, as `incus delete` does; a stopped
	// one does not.
	if err := m.Destroy(ctx, "one", instance.DestroyOptions{}); coded.CodeOf(err) != instance.CodeRunning ||
		!strings.Contains(err.Error(), "isx destroy --force one") || !get(t, c, "one").Running() {
		t.Errorf("destroy of a running instance without Force: %v", err)
	}
	if err := m.Destroy(ctx, "one", instance.DestroyOptions{Force: true}); err != nil {
		t.Errorf("destroy one with Force: %v", err)
	}
	if err := m.Destroy(ctx, "two", instance.DestroyOptions{}); err != nil {
		t.Errorf("destroy the stopped two: %v", err)
	}
	if err := m.Destroy(ctx, buildtest.BusyBoxChild, instance.DestroyOptions{Template: true}); err != nil {
		t.Errorf("destroy a template with --template: %v", err)
	}
	entries, err = m.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[0].Name == "one" {
		t.Errorf("left after destroying: %+v", entries)
	}
}

// --airgap and --proxy-only mask every NIC the template would hand down
// (here a p2p NIC added to the template, since this host has no bridge),
// and stamp the mode; the default keeps the NIC.
func TestBranchNetworkModes(t *testing.T) {
	c := incustest.Project(t)
	ctx := testContext(t)
	buildtest.Build(t, c, buildtest.Templates(t), buildtest.BusyBox)
	err := c.UpdateInstance(ctx, buildtest.BusyBox, func(inst *incus.Instance) error {
		inst.Devices["eth0"] = map[string]string{"type": "nic", "nictype": "p2p", "name": "eth0"}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	m := instance.NewManager(c)
	for _, mode := range []instance.Network{instance.NetworkAirgap, instance.NetworkProxyOnly, instance.NetworkDefault} {
		name := "net-" + string(mode)
		if err := m.Branch(ctx, instance.BranchOptions{Name: name, From: buildtest.BusyBox, Owner: "alice", Network: mode}); err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		inst := get(t, c, name)
		if got := instance.ParseStamps(inst.Config).Network; got != mode {
			t.Errorf("%s: stamped network %q", mode, got)
		}
		links := exec(t, c, name, "ls /sys/class/net")
		masked := inst.ExpandedDevices["eth0"]["type"] == "none"
		if mode == instance.NetworkDefault {
			if masked || !strings.Contains(links, "eth0") {
				t.Errorf("default network lost the NIC: %v, links %q", inst.ExpandedDevices, links)
			}
			continue
		}
		if !masked || strings.Contains(links, "eth0") {
			t.Errorf("%s: NIC not masked: %v, links %q", mode, inst.ExpandedDevices, links)
		}
	}
}

// An instance's host name is its name: on systemd, which sets the one in
// /etc/hostname at boot, that file and /etc/hosts's 127.0.1.1 line name
// it, for a branch of a template and for a copy of an instance alike.
func TestBranchHostNameIsTheName(t *testing.T) {
	c := incustest.Project(t)
	ctx := testContext(t)
	buildtest.Build(t, c, buildtest.Templates(t), buildtest.Debian)
	m := &instance.Manager{Client: c, Clock: clock.Real{}}
	if err := m.Branch(ctx, instance.BranchOptions{Name: "web", From: buildtest.Debian, Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Branch(ctx, instance.BranchOptions{Name: "web-copy", From: "web", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"web", "web-copy"} {
		got := exec(t, c, name, "hostname; cat /etc/hostname; grep '^127.0.1.1' /etc/hosts; getent hosts "+name+" >/dev/null && echo resolves")
		if want := name + "\n" + name + "\n127.0.1.1\t" + name + "\nresolves\n"; got != want {
			t.Errorf("%s: got %q, want %q", name, got, want)
		}
	}
}

// The templates NameHostOnCopy leaves keep the rest of /etc/hosts as it
// was, braces and all (they are pongo2 templates, where braces are markup),
// and name the copy, not its source.
func TestNameHostOnCopyKeepsHostsLiteral(t *testing.T) {
	c := incustest.Project(t)
	ctx := testContext(t)
	if err := c.CreateInstance(ctx, incus.InstanceCreate{Name: "src", Source: incus.ImageSource(incustest.BusyBox), Start: true}); err != nil {
		t.Fatal(err)
	}
	hosts := "127.0.0.1 localhost\n127.0.1.1 src\n# {{ x }} {% y %} {# z #}\n"
	if err := c.PushFile(ctx, "src", "/etc/hosts", strings.NewReader(hosts), incus.FileOptions{Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	if err := instance.NameHostOnCopy(ctx, c, "src"); err != nil {
		t.Fatal(err)
	}
	if err := c.StopInstance(ctx, "src", incus.StopOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateInstance(ctx, incus.InstanceCreate{Name: "dst", Source: incus.CopySource("src", true), Start: true}); err != nil {
		t.Fatal(err)
	}
	got := exec(t, c, "dst", "cat /etc/hostname /etc/hosts")
	if want := "dst\n127.0.0.1 localhost\n127.0.1.1\tdst\n# {{ x }} {% y %} {# z #}\n"; got != want {
		t.Errorf("the copy's /etc/hostname and /etc/hosts: got %q, want %q", got, want)
	}
}

func TestHostsWithName(t *testing.T) {
	for hosts, want := range map[string]string{
		"127.0.0.1 localhost\n127.0.1.1 isx\n::1 localhost\n": "127.0.0.1 localhost\n127.0.1.1\tweb\n::1 localhost\n",
		"127.0.0.1 localhost": "127.0.0.1 localhost\n127.0.1.1\tweb\n",
		"":                    "127.0.1.1\tweb\n",
	} {
		if got := instance.HostsWithName(hosts, "web"); got != want {
			t.Errorf("HostsWithName(%q) = %q, want %q", hosts, got, want)
		}
	}
}
