package config

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/incusspawn/isx/internal/isx/template"
	"github.com/incusspawn/isx/internal/isx/yamltree"
)

// DefaultProject is the Incus project isx works in unless config.yaml
// names another.
const DefaultProject = "default"

// Config is config.yaml.
type Config struct {
	Path   string
	Exists bool

	// Socket is the Incus unix socket; empty means the default.
	Socket string
	// Project is the Incus project; DefaultProject unless set.
	Project string
	// TemplatePaths are directories of template definitions, as written:
	// absolute, or starting with ~/ (see TemplateDirs).
	TemplatePaths   []string
	DefaultTemplate string
	// HostRoutes are config.yaml's host-routes, in file order, each
	// checked whole: a wrong one keeps its error in Err, and the proxy
	// skips it with a warning.
	HostRoutes []HostRoute
	// Upstreams are the proxy: section's upstreams, by the host name an
	// instance addresses: where the host proxy really sends that host's
	// requests. Without an entry a host is reached at its own name.
	Upstreams map[string]Upstream

	home       string
	oldMCPLine int
}

// HostRoute is one entry of host-routes.
type HostRoute struct {
	Name      string
	Target    string
	Templates []string
	Line      int
	// Err says what is wrong with the entry (an unknown key, a list where
	// text belongs, a name not ending in .internal, a target off the
	// loopback, no templates). Seed 001 has a wrong entry skipped with a
	// warning rather than failing config.yaml, so the error stays here.
	Err error
}

// HasOldMCPSection reports whether config.yaml still has the retired
// `mcp:` section. Its contents are never read: see MCPStatus.
func (c *Config) HasOldMCPSection() bool { return c.oldMCPLine > 0 }

// OldMCPSectionLine is the line of the `mcp:` key, or 0.
func (c *Config) OldMCPSectionLine() int { return c.oldMCPLine }

// TemplateDirs are TemplatePaths with ~/ expanded against the home
// directory, ready for template.Options.SearchPaths.
func (c *Config) TemplateDirs() []string {
	out := make([]string, 0, len(c.TemplatePaths))
	for _, p := range c.TemplatePaths {
		out = append(out, expandHome(p, c.home))
	}
	return out
}

// Route returns the host route called name.
func (c *Config) Route(name string) (HostRoute, bool) {
	for _, r := range c.HostRoutes {
		if r.Name == name {
			return r, true
		}
	}
	return HostRoute{}, false
}

func expandHome(p, home string) string {
	if p == "~" {
		return home
	}
	if strings.HasPrefix(p, "~/") {
		return filepath.Join(home, p[2:])
	}
	return p
}

// Load reads config.yaml. A missing or empty file gives the defaults.
// Unreadable, malformed, an unknown key or a bad value is an *Error naming
// the file, the line and the key.
func Load(home string) (*Config, error) {
	path := ConfigPath(home)
	data, exists, err := readFile(path)
	if err != nil {
		return nil, err
	}
	if !exists {
		return &Config{Path: path, Project: DefaultProject, home: home}, nil
	}
	c, _, err := parseConfig(data, path, home)
	return c, err
}

var (
	configKeys     = []string{"socket", "project", "template-paths", "default-template", "host-routes", "proxy", "mcp"}
	routeKeys      = []string{"target", "templates"}
	projectPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
)

// parseConfig also returns the document, so Save can edit it in place.
func parseConfig(data []byte, path, home string) (*Config, *yaml.Node, error) {
	c := &Config{Path: path, Exists: true, Project: DefaultProject, home: home}
	r := newReader(path)
	doc, root, err := r.Document(data)
	if err != nil || root == nil {
		return c, doc, err
	}
	err = r.Mapping(root, "", configKeys, func(key string, k, v *yaml.Node) error {
		var err error
		switch key {
		case "socket":
			c.Socket, err = r.absolute(v, key)
		case "project":
			c.Project, err = r.text(v, key)
			if err == nil && (len(c.Project) > 63 || !projectPattern.MatchString(c.Project)) {
				err = invalidf(path, v.Line, key, "%q is not an Incus project name (letters, digits, '_', '-' and '.')", c.Project)
			}
		case "template-paths":
			c.TemplatePaths, err = r.templatePaths(v, key)
		case "default-template":
			c.DefaultTemplate, err = r.text(v, key)
			if err == nil {
				if bad := template.CheckName(c.DefaultTemplate); bad != nil {
					err = invalidf(path, v.Line, key, "%s", bad.Error())
				}
			}
		case "host-routes":
			c.HostRoutes, err = r.hostRoutes(v, key)
		case "proxy":
			c.Upstreams, err = r.proxy(v, key)
		case "mcp":
			c.oldMCPLine = k.Line
		}
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return c, doc, nil
}

func (r *nodeReader) absolute(n *yaml.Node, key string) (string, error) {
	s, err := r.text(n, key)
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(s) || strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return "", invalidf(r.File, n.Line, key, "%q must be an absolute path", s)
	}
	return s, nil
}

func (r *nodeReader) templatePaths(n *yaml.Node, key string) ([]string, error) {
	paths, err := r.textList(n, key)
	if err != nil {
		return nil, err
	}
	for i, p := range paths {
		if !(filepath.IsAbs(p) || p == "~" || strings.HasPrefix(p, "~/")) || strings.IndexFunc(p, unicode.IsControl) >= 0 {
			return nil, invalidf(r.File, n.Content[i].Line, fmt.Sprintf("%s[%d]", key, i),
				"%q must be an absolute path or start with ~/; a relative path would depend on where isx runs", p)
		}
	}
	return paths, nil
}

// hostRoutes reads the host-routes mapping. A wrong entry is kept with
// its error rather than failing the file (see HostRoute.Err); only a
// host-routes that is not a mapping at all fails it.
func (r *nodeReader) hostRoutes(n *yaml.Node, key string) ([]HostRoute, error) {
	var routes []HostRoute
	err := r.Mapping(n, key, nil, func(name string, k, v *yaml.Node) error {
		route := HostRoute{Name: name, Line: k.Line}
		field := yamltree.Join(key, name)
		route.Err = r.Mapping(v, field, routeKeys, func(rk string, _, rv *yaml.Node) error {
			var err error
			switch rk {
			case "target":
				route.Target, err = r.text(rv, yamltree.Join(field, rk))
			case "templates":
				route.Templates, err = r.textList(rv, yamltree.Join(field, rk))
			}
			return err
		})
		if route.Err == nil && v.Kind != yaml.MappingNode {
			route.Err = invalidf(r.File, v.Line, field, "has no settings; give target: and templates:")
		}
		if route.Err == nil {
			route.Err = r.checkRoute(route, key)
		}
		routes = append(routes, route)
		return nil
	})
	return routes, err
}

// Save writes c to config.yaml atomically (0600; the directory is made
// 0700 if missing). An existing file is edited in place: comments, key
// order and the retired `mcp:` section (which isx must not lose before the
// user has moved it to mcp.yaml) are kept, and only settings that changed
// are rewritten. Save refuses to overwrite a file it cannot read, and to
// write anything Load would refuse.
func Save(home string, c *Config) error {
	path := ConfigPath(home)
	data, exists, err := readFile(path)
	if err != nil {
		return err
	}
	old := &Config{Project: DefaultProject}
	var doc *yaml.Node
	if exists {
		old, doc, err = parseConfig(data, path, home)
		if err != nil {
			return err
		}
	}
	if doc == nil || len(doc.Content) == 0 {
		doc = newDocument()
	}
	if doc.Content[0].Kind != yaml.MappingNode {
		doc.Content[0] = newDocument().Content[0]
	}
	root := doc.Content[0]
	setText(root, "socket", old.Socket, c.Socket)
	project := c.Project
	if project == DefaultProject && lookup(root, "project") < 0 {
		project = ""
	}
	setText(root, "project", old.Project, project)
	if !equalStrings(old.TemplatePaths, c.TemplatePaths) {
		if len(c.TemplatePaths) == 0 {
			removeKey(root, "template-paths")
		} else {
			setValue(root, "template-paths", listNode(c.TemplatePaths, false))
		}
	}
	setText(root, "default-template", old.DefaultTemplate, c.DefaultTemplate)
	setRoutes(root, old.HostRoutes, c.HostRoutes)

	out, err := encode(doc)
	if err != nil {
		return unusable(path, "cannot be encoded", err)
	}
	if _, _, err := parseConfig(out, path, home); err != nil {
		return fmt.Errorf("config.yaml not saved, since isx could not read it back: %w", err)
	}
	return writeAtomic(path, out)
}

func setText(root *yaml.Node, key, old, value string) {
	switch {
	case value == "":
		removeKey(root, key)
	case value != old || lookup(root, key) < 0:
		setValue(root, key, textNode(value))
	}
}

// setRoutes rewrites host-routes, keeping the nodes (and comments) of
// entries that did not change.
func setRoutes(root *yaml.Node, old, routes []HostRoute) {
	if len(routes) == 0 {
		removeKey(root, "host-routes")
		return
	}
	var existing *yaml.Node
	if i := lookup(root, "host-routes"); i >= 0 && root.Content[i+1].Kind == yaml.MappingNode {
		existing = root.Content[i+1]
	}
	mapping := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for _, route := range routes {
		if existing != nil {
			if i := lookup(existing, route.Name); i >= 0 && sameRoute(old, route) {
				mapping.Content = append(mapping.Content, existing.Content[i], existing.Content[i+1])
				continue
			}
		}
		entry := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		entry.Content = append(entry.Content, textNode("target"), textNode(route.Target), textNode("templates"), listNode(route.Templates, true))
		mapping.Content = append(mapping.Content, textNode(route.Name), entry)
	}
	setValue(root, "host-routes", mapping)
}

func sameRoute(old []HostRoute, r HostRoute) bool {
	for _, o := range old {
		if o.Name == r.Name {
			return o.Target == r.Target && equalStrings(o.Templates, r.Templates)
		}
	}
	return false
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
