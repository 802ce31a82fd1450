package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/coded"
)

func writeConfig(t testing.TB, home, content string) string {
	t.Helper()
	path := ConfigPath(home)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func mustLoad(t *testing.T, home string) *Config {
	t.Helper()
	c, err := Load(home)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPaths(t *testing.T) {
	got := []string{Dir("/h"), StateDir("/h"), ConfigPath("/h"), MCPPath("/h")}
	want := []string{"/h/.config/incus-spawn", "/h/.local/state/incus-spawn", "/h/.config/incus-spawn/config.yaml", "/h/.config/incus-spawn/mcp.yaml"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v", got)
	}
}

func TestLoadMissingConfigGivesDefaults(t *testing.T) {
	home := t.TempDir()
	c := mustLoad(t, home)
	if c.Exists || c.Project != "default" || c.Socket != "" || len(c.TemplatePaths) != 0 || c.HasOldMCPSection() || c.Path != ConfigPath(home) {
		t.Fatalf("%+v", c)
	}
	for _, empty := range []string{"", "# nothing\n"} {
		writeConfig(t, home, empty)
		if c := mustLoad(t, home); !c.Exists || c.Project != "default" {
			t.Fatalf("%q: %+v", empty, c)
		}
	}
}

func TestLoadConfig(t *testing.T) {
	home := t.TempDir()
	writeConfig(t, home, `socket: /var/lib/incus/unix.socket
project: isx-work
template-paths:
  - ~/templates
  - /srv/isx-templates
default-template: tpl-dev
host-routes:
  work.isx.internal:
    target: 127.0.0.1:7070       # on this host's loopback
    templates: [tpl-isx-agent]   # required
  other.isx.internal:
    target: localhost:8080
    templates: [tpl-a, tpl-b]
`)
	c := mustLoad(t, home)
	if c.Socket != "/var/lib/incus/unix.socket" || c.Project != "isx-work" || c.DefaultTemplate != "tpl-dev" || c.HasOldMCPSection() {
		t.Fatalf("%+v", c)
	}
	if !reflect.DeepEqual(c.TemplatePaths, []string{"~/templates", "/srv/isx-templates"}) {
		t.Errorf("template paths %v", c.TemplatePaths)
	}
	if !reflect.DeepEqual(c.TemplateDirs(), []string{filepath.Join(home, "templates"), "/srv/isx-templates"}) {
		t.Errorf("template dirs %v", c.TemplateDirs())
	}
	want := []HostRoute{
		{Name: "work.isx.internal", Target: "127.0.0.1:7070", Templates: []string{"tpl-isx-agent"}, Line: 8},
		{Name: "other.isx.internal", Target: "localhost:8080", Templates: []string{"tpl-a", "tpl-b"}, Line: 11},
	}
	if !reflect.DeepEqual(c.HostRoutes, want) {
		t.Errorf("routes %+v", c.HostRoutes)
	}
	if r, ok := c.Route("other.isx.internal"); !ok || r.Target != "localhost:8080" {
		t.Errorf("Route: %+v %v", r, ok)
	}
	if _, ok := c.Route("nope.internal"); ok {
		t.Error("Route found a missing route")
	}
}

// Seed 001: a host-routes entry that is wrong in any way is skipped with
// a warning, so its shape errors stay on the entry instead of failing
// config.yaml.
func TestHostRouteShapeErrorsStayOnTheEntry(t *testing.T) {
	home := t.TempDir()
	path := writeConfig(t, home, `host-routes:
  good.internal:
    target: 127.0.0.1:1
    templates: [tpl-a]
  typo.internal:
    target: 127.0.0.1:2
    template: [tpl-a]
  list.internal: [a]
  empty.internal:
  nested.internal:
    target: {host: x}
`)
	c := mustLoad(t, home)
	if len(c.HostRoutes) != 5 {
		t.Fatalf("routes %+v", c.HostRoutes)
	}
	if c.HostRoutes[0].Err != nil {
		t.Errorf("good route: %v", c.HostRoutes[0].Err)
	}
	for i, want := range map[int]string{1: ":7: host-routes.typo.internal.template: unknown key", 2: ":8: host-routes.list.internal: must be a mapping", 3: ":9: host-routes.empty.internal: has no settings", 4: ":11: host-routes.nested.internal.target: must be text"} {
		err := c.HostRoutes[i].Err
		if coded.CodeOf(err) != CodeInvalid || !strings.HasPrefix(err.Error(), path+want) {
			t.Errorf("route %d: %v, want %s%s", i, err, path, want)
		}
	}
}

func TestOldMCPSectionIsDetectedNotUsed(t *testing.T) {
	home := t.TempDir()
	writeConfig(t, home, "project: default\nmcp:\n  templates: [Not A Name]\n  bogus: {deep: [1]}\n")
	c := mustLoad(t, home)
	if !c.HasOldMCPSection() || c.OldMCPSectionLine() != 2 {
		t.Fatalf("old section line %d", c.OldMCPSectionLine())
	}
}

func TestLoadConfigErrors(t *testing.T) {
	cases := []struct {
		name, yaml string
		line       int
		key, text  string
	}{
		{"malformed", "project: [x\n", 2, "", "not valid YAML"},
		{"not a mapping", "- x\n", 1, "", "must be a mapping"},
		{"unknown key", "project: default\nprojct: x\n", 2, "projct", `unknown key "projct"`},
		{"duplicate key", "project: a\nproject: b\n", 2, "project", "appears twice"},
		{"relative socket", "socket: incus.sock\n", 1, "socket", "absolute path"},
		{"socket list", "socket: [a]\n", 1, "socket", "must be text"},
		{"empty project", "project:\n", 1, "project", "has no value"},
		{"bad project", "project: my project\n", 1, "project", "not an Incus project name"},
		{"template-paths not list", "template-paths: /srv\n", 1, "template-paths", "must be a list"},
		{"relative template path", "template-paths:\n  - /ok\n  - templates\n", 3, "template-paths[1]", "absolute path or start with ~/"},
		{"other user's home", "template-paths: [~bob/t]\n", 1, "template-paths[0]", "absolute path"},
		{"bad default template", "default-template: Dev\n", 1, "default-template", "not a template name"},
		{"host-routes list", "host-routes: [a]\n", 1, "host-routes", "must be a mapping"},
		{"alias", "project: &p a\ndefault-template: *p\n", 2, "default-template", "aliases"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			path := writeConfig(t, home, c.yaml)
			_, err := Load(home)
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("got %T %v", err, err)
			}
			if ce.Code != CodeInvalid || ce.File != path || ce.Line != c.line || ce.Key != c.key {
				t.Errorf("code %s file %s line %d key %q (%v)", ce.Code, ce.File, ce.Line, ce.Key, err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, fmt.Sprintf("%s:%d: ", path, c.line)) || !strings.Contains(msg, c.key) || !strings.Contains(msg, c.text) {
				t.Errorf("message %q does not name line %d, %q and %q", msg, c.line, c.key, c.text)
			}
		})
	}
}

func TestSaveNewConfig(t *testing.T) {
	home := t.TempDir()
	c := &Config{Project: "default", TemplatePaths: []string{"~/t"}, DefaultTemplate: "tpl-dev",
		HostRoutes: []HostRoute{{Name: "work.isx.internal", Target: "127.0.0.1:7070", Templates: []string{"tpl-a"}}}}
	if err := Save(home, c); err != nil {
		t.Fatal(err)
	}
	checkMode(t, Dir(home), 0o700|os.ModeDir)
	checkMode(t, ConfigPath(home), 0o600)
	data, _ := os.ReadFile(ConfigPath(home))
	if strings.Contains(string(data), "project") {
		t.Errorf("the default project was written out:\n%s", data)
	}
	got := mustLoad(t, home)
	if got.Project != "default" || !reflect.DeepEqual(got.TemplatePaths, c.TemplatePaths) || got.DefaultTemplate != "tpl-dev" ||
		len(got.HostRoutes) != 1 || got.HostRoutes[0].Target != "127.0.0.1:7070" || !reflect.DeepEqual(got.HostRoutes[0].Templates, []string{"tpl-a"}) {
		t.Fatalf("%+v", got)
	}
}

func TestSaveKeepsCommentsAndOldSection(t *testing.T) {
	home := t.TempDir()
	path := writeConfig(t, home, `# isx settings
project: work   # the team project
template-paths:
  - /srv/a   # shared
host-routes:
  keep.internal:   # the controller
    target: 127.0.0.1:1
    templates: [tpl-a]
  drop.internal:
    target: 127.0.0.1:2
    templates: [tpl-b]
mcp:
  templates: [tpl-old]   # move me
  max-instances: 2
`)
	c := mustLoad(t, home)
	c.DefaultTemplate = "tpl-dev"
	c.Socket = "/run/incus.sock"
	c.HostRoutes = []HostRoute{c.HostRoutes[0], {Name: "new.internal", Target: "127.0.0.1:3", Templates: []string{"tpl-c"}}}
	if err := Save(home, c); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	text := string(data)
	for _, kept := range []string{"# isx settings", "project: work # the team project", "- /srv/a # shared", "keep.internal: # the controller",
		"mcp:", "templates: [tpl-old] # move me", "max-instances: 2", "default-template: tpl-dev", "socket: /run/incus.sock", "new.internal"} {
		if !strings.Contains(text, kept) {
			t.Errorf("missing %q in\n%s", kept, text)
		}
	}
	if strings.Contains(text, "drop.internal") {
		t.Errorf("removed route still there:\n%s", text)
	}
	got := mustLoad(t, home)
	if !got.HasOldMCPSection() || got.Project != "work" || len(got.HostRoutes) != 2 {
		t.Fatalf("%+v", got)
	}
	// Clearing settings removes their keys.
	got.Socket, got.DefaultTemplate, got.TemplatePaths, got.HostRoutes, got.Project = "", "", nil, nil, ""
	if err := Save(home, got); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(path)
	for _, gone := range []string{"socket", "default-template", "template-paths", "host-routes", "project"} {
		if strings.Contains(string(data), gone+":") {
			t.Errorf("%s still written:\n%s", gone, data)
		}
	}
	if !strings.Contains(string(data), "mcp:") {
		t.Errorf("old section lost:\n%s", data)
	}
}

func TestSaveRefuses(t *testing.T) {
	home := t.TempDir()
	path := writeConfig(t, home, "bogus: 1\n")
	err := Save(home, &Config{Project: "default"})
	if coded.CodeOf(err) != CodeInvalid || !strings.Contains(err.Error(), path+":1: bogus") {
		t.Fatalf("invalid existing file: %v", err)
	}
	if data, _ := os.ReadFile(path); string(data) != "bogus: 1\n" {
		t.Fatal("an invalid file was overwritten")
	}
	writeConfig(t, home, "project: a\n")
	err = Save(home, &Config{Project: "not a project"})
	if coded.CodeOf(err) != CodeInvalid || !strings.Contains(err.Error(), "project") {
		t.Fatalf("invalid new value: %v", err)
	}
	if data, _ := os.ReadFile(path); string(data) != "project: a\n" {
		t.Fatal("an invalid value was written")
	}
	entries, _ := os.ReadDir(Dir(home))
	if len(entries) != 1 {
		t.Fatalf("leftover files: %v", entries)
	}
}

func TestSaveWritesThroughSymlink(t *testing.T) {
	home := t.TempDir()
	dotfiles := filepath.Join(home, "dotfiles", "config.yaml")
	if err := os.MkdirAll(filepath.Dir(dotfiles), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dotfiles, []byte("project: a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(Dir(home), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dotfiles, ConfigPath(home)); err != nil {
		t.Fatal(err)
	}
	if err := Save(home, &Config{Project: "b"}); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Lstat(ConfigPath(home)); err != nil || info.Mode()&os.ModeSymlink == 0 {
		t.Fatal("the symlink was replaced")
	}
	if c := mustLoad(t, home); c.Project != "b" {
		t.Fatalf("project %q", c.Project)
	}
}

// ISX-245, ISX-246, ISX-247, ISX-248: a route whose name does not end in
// .internal, whose target is off this host's loopback, or whose
// templates: is missing or empty is kept with an error naming the
// setting at fault, so the proxy can skip it with that warning; the
// good entries around it stay usable (ISX-249).
func TestHostRouteContentsChecked(t *testing.T) {
	home := t.TempDir()
	path := writeConfig(t, home, `host-routes:
  work.isx.internal:
    target: 127.0.0.1:7070
    templates: [tpl-isx-agent]
  work.example:
    target: 127.0.0.1:7070
    templates: [tpl-a]
  far.internal:
    target: 10.0.0.5:7070
    templates: [tpl-a]
  none.internal:
    target: 127.0.0.1:7070
  empty.internal:
    target: 127.0.0.1:7070
    templates: []
  url.internal:
    target: http://127.0.0.1:7070
    templates: [tpl-a]
  noport.internal:
    target: localhost
    templates: [tpl-a]
  mcp.isx.internal:
    target: 127.0.0.1:7070
    templates: [tpl-a]
  badtpl.internal:
    target: "[::1]:7070"
    templates: [Not A Name]
  six.internal:
    target: "[::1]:7071"
    templates: [tpl-a]
`)
	c := mustLoad(t, home)
	good := map[string]bool{"work.isx.internal": true, "six.internal": true}
	want := map[string]string{
		"work.example":     ":5: host-routes.work.example: \"work.example\" is not a route name",
		"far.internal":     ":8: host-routes.far.internal.target: \"10.0.0.5:7070\" is not on this host's loopback",
		"none.internal":    ":11: host-routes.none.internal.templates: is required",
		"empty.internal":   ":13: host-routes.empty.internal.templates: is required",
		"url.internal":     ":16: host-routes.url.internal.target: \"http://127.0.0.1:7070\" is not host:port",
		"noport.internal":  ":19: host-routes.noport.internal.target: \"localhost\" is not host:port",
		"mcp.isx.internal": ":22: host-routes.mcp.isx.internal: mcp.isx.internal is where coordinator instances reach isx mcp",
		"badtpl.internal":  ":25: host-routes.badtpl.internal.templates: ",
	}
	if len(c.HostRoutes) != len(good)+len(want) {
		t.Fatalf("routes %+v", c.HostRoutes)
	}
	for _, r := range c.HostRoutes {
		if good[r.Name] {
			if r.Err != nil {
				t.Errorf("%s: %v", r.Name, r.Err)
			}
			continue
		}
		if coded.CodeOf(r.Err) != CodeInvalid || !strings.HasPrefix(r.Err.Error(), path+want[r.Name]) {
			t.Errorf("%s: %v, want %s%s", r.Name, r.Err, path, want[r.Name])
		}
	}
}
