package config

import (
	"errors"
	"net"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/isx/template"
)

// FuzzLoadConfig: Load never panics on config.yaml; a refusal is a *Error
// coded config_invalid naming the file; a host route it accepts has a
// .internal name and a loopback target and templates by valid names, and a
// wrong one keeps a coded error naming the file; and what Load read,
// saved with Save, loads again as the same settings and routes.
func FuzzLoadConfig(f *testing.F) {
	f.Add([]byte("host-routes:\n  work.isx.internal:\n    target: 127.0.0.1:7070\n    templates: [tpl-dev]\n"))
	f.Add([]byte("project: p\nsocket: /run/incus.sock\ntemplate-paths: [~/t, /abs]\ndefault-template: tpl-a\n"))
	f.Add([]byte("host-routes:\n  bad:\n    target: 10.0.0.1:80\n    templates: []\n  ok.internal: {target: '[::1]:1', templates: [a]}\n"))
	f.Add([]byte("host-routes:\n  mcp.isx.internal: {target: localhost:65535, templates: [a], extra: 1}\n"))
	f.Add([]byte("host-routes: [a]\n"))
	f.Add([]byte("proxy:\n  upstreams:\n    api.anthropic.com: http://127.0.0.1:9000/base\n"))
	f.Add([]byte("mcp:\n  max-instances: 3\nhost-routes:\n  # kept\n  a.internal:\n    target: 127.0.0.1:1\n    templates: [x]\n"))
	f.Add([]byte("a: &x [*x, *x]\n"))
	home := f.TempDir()
	path := writeConfig(f, home, "")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Load(home)
		if err != nil {
			checkConfigError(t, err, path)
			return
		}
		for _, r := range c.HostRoutes {
			if r.Err != nil {
				checkConfigError(t, r.Err, path)
				continue
			}
			host, _, splitErr := net.SplitHostPort(r.Target)
			if !strings.HasSuffix(r.Name, ".internal") || r.Name == CoordinatorHost || splitErr != nil || !loopbackHosts[strings.ToLower(host)] || len(r.Templates) == 0 {
				t.Fatalf("accepted route %+v", r)
			}
			for _, name := range r.Templates {
				if template.CheckName(name) != nil {
					t.Fatalf("accepted route %+v with template %q", r, name)
				}
			}
		}
		// Save writes only routes Load accepts; a wrong entry is for the user.
		saved := *c
		saved.HostRoutes = slices.DeleteFunc(slices.Clone(c.HostRoutes), func(r HostRoute) bool { return r.Err != nil })
		if err := Save(home, &saved); err != nil {
			t.Fatalf("Save of what Load read: %v\n%s", err, data)
		}
		back, err := Load(home)
		if err != nil {
			t.Fatalf("Load of what Save wrote: %v", err)
		}
		if back.Socket != c.Socket || back.Project != c.Project || !reflect.DeepEqual(back.TemplatePaths, c.TemplatePaths) ||
			back.DefaultTemplate != c.DefaultTemplate || back.HasOldMCPSection() != c.HasOldMCPSection() || !reflect.DeepEqual(upstreams(back), upstreams(c)) {
			t.Fatalf("saved and loaded again: %+v\nfirst: %+v", back, c)
		}
		if got, want := routes(back.HostRoutes), routes(saved.HostRoutes); !reflect.DeepEqual(got, want) {
			t.Fatalf("routes saved and loaded again: %v, saved %v", got, want)
		}
	})
}

func checkConfigError(t *testing.T, err error, path string) {
	t.Helper()
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("untyped error %T: %v", err, err)
	}
	if ce.Code != CodeInvalid || ce.File != path || ce.Message == "" || !strings.Contains(err.Error(), "config.yaml") {
		t.Fatalf("incomplete error %+v", ce)
	}
}

// routes are the parts of host routes a file says, without where they were.
func routes(list []HostRoute) []string {
	var out []string
	for _, r := range list {
		out = append(out, r.Name+" "+r.Target+" "+strings.Join(r.Templates, ","))
	}
	return out
}

func upstreams(c *Config) map[string]string {
	out := map[string]string{}
	for host, u := range c.Upstreams {
		out[host] = u.URL.String()
	}
	return out
}
