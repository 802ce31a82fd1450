package proxy_test

import (
	"context"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/proxy"
	"github.com/incusspawn/isx/internal/isx/proxy/proxytest"
)

// controller is a program of the user's on the host's loopback that
// records every request reaching it.
type controller struct {
	addr string
	mu   sync.Mutex
	seen []seenRequest
}

type seenRequest struct {
	Method, Path string
	Header       http.Header
	Body         string
}

// controllerBody is what the controller answers, bytes a proxy could
// mangle included.
const controllerBody = "reply\x00\xff body\r\n"

func startController(t testing.TB) *controller {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &controller{addr: l.Addr().String()}
	c.serve(t, l)
	return c
}

// serve answers, and records, every request that comes on l until the
// test ends.
func (c *controller) serve(t testing.TB, l net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.seen = append(c.seen, seenRequest{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: string(body)})
		c.mu.Unlock()
		if r.URL.Path == "/echo" {
			// A careless controller: the route secret goes back as a header.
			w.Header().Set(proxy.RouteSecretHeader, r.Header.Get(proxy.RouteSecretHeader))
			w.Header().Set("X-Echo", "secret="+r.Header.Get(proxy.RouteSecretHeader))
		}
		w.Header().Set("X-Controller", "yes")
		io.WriteString(w, controllerBody) //nolint:errcheck // the test reads what arrives
	})}
	go srv.Serve(l) //nolint:errcheck // ends at Close
	t.Cleanup(func() { srv.Close() })
}

func (c *controller) requests() []seenRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]seenRequest(nil), c.seen...)
}

// routeWorld is a proxy with host routes read from a real config.yaml.
type routeWorld struct {
	*world
	work, second *controller
}

const routesConfig = `host-routes:
  work.isx.internal:
    target: WORK
    templates: [` + busyboxAccounts + `]
  second.isx.internal:
    target: SECOND
    templates: [` + busyboxAccounts + `]
  work.example:
    target: WORK
    templates: [` + busyboxAccounts + `]
  far.internal:
    target: 10.0.0.5:7070
    templates: [` + busyboxAccounts + `]
  none.internal:
    target: WORK
  empty.internal:
    target: WORK
    templates: []
`

func newRouteWorld(t testing.TB) *routeWorld {
	w := &routeWorld{world: newWorld(t, busyboxAccounts, busyboxNone), work: startController(t), second: startController(t)}
	text := strings.NewReplacer("WORK", w.work.addr, "SECOND", w.second.addr).Replace(routesConfig)
	if err := os.WriteFile(config.ConfigPath(w.home), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(w.home)
	if err != nil {
		t.Fatal(err)
	}
	opts := w.options(clock.Real{})
	opts.HostRoutes = cfg.HostRoutes
	w.start(opts)
	return w
}

// call sends a request from the instance to a route through the proxy
// its environment names, with the instance's own secret unless told
// otherwise by extra flags.
func (w *routeWorld) call(name, url string, flags ...string) (string, int) {
	w.t.Helper()
	return w.run(name, proxytest.ClientPath+" request -url "+url+" "+strings.Join(flags, " "))
}

const withSecret = "-secret-file " + instance.SecretFile

func (w *routeWorld) secretFile(route string) string {
	w.t.Helper()
	data, err := os.ReadFile(config.RouteSecretPath(w.home, route))
	if err != nil {
		w.t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

// routeHeaders sends a call from agent to work.isx.internal with its
// secret and flags, and returns the headers the controller saw.
func (w *routeWorld) routeHeaders(t *testing.T, flags string) http.Header {
	t.Helper()
	before := len(w.work.requests())
	w.mustRun("agent", proxytest.ClientPath+" request -url https://work.isx.internal/ping "+withSecret+flags)
	seen := w.work.requests()
	if len(seen) != before+1 {
		t.Fatalf("the controller saw %d new requests", len(seen)-before)
	}
	return seen[before].Header
}

// secretFlags put the instance secret in headers the instance named,
// plain and base64-encoded.
func secretFlags(secret string) string {
	return " -header 'Authorization: Bearer " + secret + "'" +
		" -header 'X-Mine: Basic " + base64.StdEncoding.EncodeToString([]byte(secret)) + "'"
}

// bearingSecret names the headers that carry secret, plain or
// base64-encoded.
func bearingSecret(h http.Header, secret string) []string {
	encoded := base64.StdEncoding.EncodeToString([]byte(secret))
	var names []string
	for name, values := range h {
		if slices.ContainsFunc(values, func(v string) bool { return strings.Contains(v, secret) || strings.Contains(v, encoded) }) {
			names = append(names, name)
		}
	}
	return names
}

// proxyFlags send headers under proxy names other than
// Proxy-Authorization and Proxy-Connection, one in a spelling only a CGI
// program reads as such.
const proxyFlags = " -header 'Proxy-Foo: x' -header 'proxy_bar: y' -header 'Proxy: http://attacker.example'"

// proxyNamed names the headers a CGI program reads as Proxy or Proxy-.
func proxyNamed(h http.Header) []string {
	var names []string
	for name := range h {
		cgi := strings.ToLower(strings.ReplaceAll(name, "_", "-"))
		if cgi == "proxy" || strings.HasPrefix(cgi, "proxy-") {
			names = append(names, name)
		}
	}
	return names
}

// refusedRoute runs a call that must not reach the controller.
func (w *routeWorld) refusedRoute(t *testing.T, name, why, status, url string, flags ...string) string {
	t.Helper()
	before := len(w.work.requests())
	out, code := w.call(name, url, flags...)
	if code == 0 || !strings.Contains(out, "status="+status) {
		t.Errorf("%s: want %s, got exit %d:\n%s", why, status, code, out)
	}
	if after := w.work.requests(); len(after) != before {
		t.Errorf("%s: reached the controller: %+v", why, after[before:])
	}
	return out
}

// ISX-243, ISX-244, ISX-250, ISX-256, ISX-257, ISX-258, ISX-259, ISX-260,
// ISX-261, ISX-262, ISX-263, ISX-264, ISX-265, ISX-266, ISX-267, ISX-251,
// ISX-252, ISX-253, ISX-254, ISX-255, ISX-245, ISX-246, ISX-247, ISX-248,
// ISX-249: the refusal matrix of host routes, each against a real
// controller on the host's loopback that records what reaches it.
func TestHostRoutes(t *testing.T) {
	w := newRouteWorld(t)
	w.branch("agent", busyboxAccounts, instance.NetworkProxyOnly)
	w.branch("plain", busyboxAccounts, instance.NetworkDefault)
	w.branch("other", busyboxNone, instance.NetworkDefault)
	secretPath := config.RouteSecretPath(w.home, "work.isx.internal")
	if _, err := os.Stat(secretPath); !os.IsNotExist(err) {
		t.Fatalf("the route secret exists before the route was first served: %v", err)
	}

	t.Run("served", func(t *testing.T) {
		out := w.mustRun("agent", proxytest.ClientPath+` request -url https://work.isx.internal/ping?x=1 -secret-file "$ISX_INSTANCE_SECRET_FILE" -header 'X-Isx-Instance: forged' -header 'X-Isx-Foo: bar' -header 'X-Isx-Route-Secret: guessed' -header 'X_Isx_Instance: forged' -header 'x_isx_template: forged' -header 'X-Isx_Route-Secret: guessed' -header 'X-Other: kept'`)
		seen := w.work.requests()
		if len(seen) != 1 {
			t.Fatalf("the controller saw %d requests:\n%s", len(seen), out)
		}
		got := seen[0]
		if got.Method != http.MethodGet || got.Path != "/ping" {
			t.Errorf("the controller saw %s %s", got.Method, got.Path)
		}
		routeSecret := w.secretFile("work.isx.internal")
		want := map[string]string{proxy.InstanceHeader: "agent", proxy.TemplateHeader: busyboxAccounts, proxy.RouteSecretHeader: routeSecret, "X-Other": "kept"}
		for name, value := range want {
			if v := got.Header.Values(name); len(v) != 1 || v[0] != value {
				t.Errorf("the controller saw %s = %q, want %q", name, v, value)
			}
		}
		// ISX-259: a CGI or WSGI controller reads `_` as `-`, so no
		// spelling of an X-Isx- name the instance sent gets through.
		for name := range got.Header {
			if strings.HasPrefix(strings.ToLower(strings.ReplaceAll(name, "_", "-")), "x-isx-") && want[name] == "" {
				t.Errorf("the controller saw %s = %q, which the instance sent", name, got.Header.Values(name))
			}
		}
		if !strings.Contains(out, "body="+controllerBody) || !strings.Contains(out, "header X-Controller: yes") {
			t.Errorf("the response was not relayed as the controller sent it:\n%q", out)
		}
		info, err := os.Stat(secretPath)
		if err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("the route secret file: %v %v", info, err)
		}
		// A proxy-only and a default instance alike.
		w.mustRun("plain", proxytest.ClientPath+" request -url https://work.isx.internal/ping "+withSecret)
		if seen := w.work.requests(); len(seen) != 2 || seen[1].Header.Get(proxy.InstanceHeader) != "plain" {
			t.Errorf("the default instance's call: %+v", seen)
		}
		// Each route has its own secret.
		w.mustRun("agent", proxytest.ClientPath+" request -url https://second.isx.internal/x "+withSecret)
		if s := w.second.requests(); len(s) != 1 || s[0].Header.Get(proxy.RouteSecretHeader) != w.secretFile("second.isx.internal") || s[0].Header.Get(proxy.RouteSecretHeader) == routeSecret {
			t.Errorf("the second route's secret: %+v", s)
		}
		// No instance has a route's secret: neither in its files nor in
		// its environment.
		for _, name := range []string{"agent", "plain"} {
			if out, code := w.run(name, "grep -rl "+routeSecret+" /etc /run /root /home /tmp /var /usr/local 2>/dev/null; env | grep "+routeSecret); code == 0 || strings.TrimSpace(out) != "" {
				t.Errorf("%s holds the route secret: %s", name, out)
			}
		}
	})

	// The controller is the host's, but the instance secret is for the
	// proxy alone: put under any other header by the instance, plain or
	// base64-encoded, it is dropped on the way, as on the way to a
	// provider; the instance's own headers stay.
	t.Run("instance secret kept from the controller", func(t *testing.T) {
		secret := w.secret("agent")
		got := w.routeHeaders(t, secretFlags(secret)+" -header 'X-Other: kept'")
		for _, name := range bearingSecret(got, secret) {
			t.Errorf("the controller saw the instance secret in %s", name)
		}
		if got.Get("X-Other") != "kept" || got.Get(proxy.InstanceHeader) != "agent" {
			t.Errorf("the other headers were lost: %v", got)
		}
	})

	// A CGI controller reads Proxy as its own HTTP_PROXY (httpoxy), and
	// the other Proxy- headers, however spelled, were for the proxy.
	t.Run("proxy headers kept from the controller", func(t *testing.T) {
		got := w.routeHeaders(t, proxyFlags+" -header 'X-Other: kept'")
		for _, name := range proxyNamed(got) {
			t.Errorf("the controller saw %s = %q", name, got.Values(name))
		}
		if got.Get("X-Other") != "kept" {
			t.Errorf("the other headers were lost: %v", got)
		}
	})

	t.Run("echoed secret removed", func(t *testing.T) {
		out := w.mustRun("agent", proxytest.ClientPath+" request -url https://work.isx.internal/echo "+withSecret)
		secret := w.secretFile("work.isx.internal")
		if strings.Contains(out, secret) || strings.Contains(out, proxy.RouteSecretHeader) {
			t.Errorf("the instance got the route secret back:\n%s", out)
		}
		if !strings.Contains(out, "header X-Controller: yes") {
			t.Errorf("the other headers were lost:\n%s", out)
		}
	})

	t.Run("missing secret", func(t *testing.T) {
		w.refusedRoute(t, "agent", "no secret", "401", "https://work.isx.internal/ping")
	})
	t.Run("wrong secret", func(t *testing.T) {
		w.refusedRoute(t, "agent", "a wrong secret", "401", "https://work.isx.internal/ping", "-header 'X-Isx-Instance-Secret: "+strings.Repeat("0", 64)+"'")
	})
	t.Run("another instance's secret", func(t *testing.T) {
		w.refusedRoute(t, "agent", "the secret of plain", "401", "https://work.isx.internal/ping", "-header 'X-Isx-Instance-Secret: "+w.secret("plain")+"'")
	})
	t.Run("unlisted template", func(t *testing.T) {
		out := w.refusedRoute(t, "other", "an instance of "+busyboxNone, "403", "https://work.isx.internal/ping", withSecret)
		if !strings.Contains(out, "does not serve instances of "+busyboxNone) {
			t.Errorf("the refusal does not say why:\n%s", out)
		}
	})
	t.Run("project-local", func(t *testing.T) {
		w.projectLocal("local", busyboxAccounts)
		out := w.refusedRoute(t, "local", "a project-local build", "403", "https://work.isx.internal/ping", withSecret)
		if !strings.Contains(out, "project-local") {
			t.Errorf("the refusal does not say why:\n%s", out)
		}
	})
	t.Run("websocket", func(t *testing.T) {
		before := len(w.work.requests())
		out, code := w.run("agent", proxytest.ClientPath+" ws -url wss://work.isx.internal/ws "+withSecret)
		if code == 0 || !strings.Contains(out, "status=400") {
			t.Errorf("a WebSocket to a route: exit %d\n%s", code, out)
		}
		if after := w.work.requests(); len(after) != before {
			t.Errorf("the WebSocket reached the controller: %+v", after[before:])
		}
	})
	t.Run("bad entries skipped", func(t *testing.T) {
		logs := w.logs.String()
		for _, name := range []string{"work.example", "far.internal", "none.internal", "empty.internal"} {
			if strings.Count(logs, "skipped a host route that is wrong\" route="+name+" ") != 1 {
				t.Errorf("no single warning for %s in the log:\n%s", name, logs)
			}
		}
		if strings.Contains(logs, "skipped a host route that is wrong\" route=work.isx.internal") {
			t.Error("the good route was skipped")
		}
		out, code := w.run("agent", proxytest.ClientPath+" request -url https://far.internal/ping "+withSecret)
		if code == 0 || strings.Contains(out, "status=200") {
			t.Errorf("a skipped route was served:\n%s", out)
		}
	})
}

// projectLocal makes an instance stamped as built from a project-local
// definition of from.
func (w *world) projectLocal(name, from string) {
	w.t.Helper()
	owner, _ := instance.CurrentOwner()
	m := &instance.Manager{Client: w.client, Clock: clock.Real{}, ProxyDir: w.proxyDir()}
	if err := m.Branch(w.ctx(), instance.BranchOptions{Name: name, From: from, Owner: owner, NoStart: true}); err != nil {
		w.t.Fatal(err)
	}
	err := w.client.UpdateInstance(w.ctx(), name, func(inst *incus.Instance) error {
		inst.Config[instance.KeySource] = "project-local"
		return nil
	})
	if err != nil {
		w.t.Fatal(err)
	}
	if err := w.client.StartInstance(w.ctx(), name); err != nil {
		w.t.Fatal(err)
	}
	if _, err := w.server.Admit(context.Background(), name); err != nil {
		w.t.Fatal(err)
	}
	proxytest.PushClient(w.t, w.client, name)
}

// ISX-268, ISX-269, ISX-270, ISX-271, ISX-272, ISX-273, ISX-274: a route
// whose secret file, its directory or ~/.config/incus-spawn is not the
// user's alone is answered 503, and served again by the very next request
// once fixed; a deleted secret is made anew at once.
func TestHostRouteSecretPermissions(t *testing.T) {
	w := newRouteWorld(t)
	w.branch("agent", busyboxAccounts, instance.NetworkProxyOnly)
	served := func(t *testing.T, why string) {
		t.Helper()
		before := len(w.work.requests())
		out, code := w.call("agent", "https://work.isx.internal/ping", withSecret)
		if code != 0 || len(w.work.requests()) != before+1 {
			t.Errorf("%s: not served (exit %d):\n%s\nlog:\n%s", why, code, out, w.logs.String())
		}
	}
	unsafe := func(t *testing.T, why string) {
		t.Helper()
		w.refusedRoute(t, "agent", why, "503", "https://work.isx.internal/ping", withSecret)
	}
	served(t, "the first call")
	configDir := config.Dir(w.home)
	routesDir := config.HostRoutesDir(w.home)
	secretPath := config.RouteSecretPath(w.home, "work.isx.internal")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	const nobody = 65534 // a user and group that are not the test's
	uid, gid := os.Getuid(), os.Getgid()

	t.Run("secret readable by others", func(t *testing.T) {
		must(os.Chmod(secretPath, 0o640))
		unsafe(t, "chmod 640 on the secret")
		must(os.Chmod(secretPath, 0o600))
		served(t, "after chmod 600")
	})
	for _, c := range []struct{ name, path string }{{"secret file", secretPath}, {"host-routes directory", routesDir}, {"config directory", configDir}} {
		t.Run(c.name+" not the user's", func(t *testing.T) {
			must(os.Chown(c.path, nobody, gid))
			unsafe(t, "chown of the "+c.name)
			must(os.Chown(c.path, uid, gid))
			served(t, "after chown back")
		})
	}
	for _, c := range []struct{ name, path string }{{"host-routes directory", routesDir}, {"config directory", configDir}} {
		t.Run(c.name+" writable by others", func(t *testing.T) {
			info, err := os.Stat(c.path)
			must(err)
			must(os.Chmod(c.path, info.Mode().Perm()|0o002))
			unsafe(t, "chmod o+w on the "+c.name)
			must(os.Chmod(c.path, info.Mode().Perm()))
			served(t, "after chmod o-w")
		})
	}
	t.Run("config directory writable by a shared group", func(t *testing.T) {
		info, err := os.Stat(configDir)
		must(err)
		// nogroup is nobody's group: shared with another account.
		must(os.Chown(configDir, uid, nobody))
		must(os.Chmod(configDir, 0o770))
		unsafe(t, "g+w for a shared group")
		// The user's own private group (a umask of 002) is allowed.
		must(os.Chown(configDir, uid, gid))
		if !privateGroup(t, gid) {
			t.Fatalf("group %d is not private here; the test needs the user's own group", gid)
		}
		served(t, "g+w for the user's private group")
		must(os.Chmod(configDir, info.Mode().Perm()))
	})
	t.Run("deleted secret made anew", func(t *testing.T) {
		old := w.secretFile("work.isx.internal")
		must(os.Remove(secretPath))
		served(t, "after rm")
		fresh := w.secretFile("work.isx.internal")
		seen := w.work.requests()
		if fresh == old || seen[len(seen)-1].Header.Get(proxy.RouteSecretHeader) != fresh {
			t.Errorf("after rm the secret is %q (was %q), the controller got %q", fresh, old, seen[len(seen)-1].Header.Get(proxy.RouteSecretHeader))
		}
		info, err := os.Stat(secretPath)
		if err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("the new secret file: %v %v", info, err)
		}
	})
	if strings.Count(w.logs.String(), "refused a host route whose secret is not safe") < 7 {
		t.Errorf("the refusals were not logged:\n%s", w.logs.String())
	}
	if entries, _ := filepath.Glob(filepath.Join(routesDir, ".*")); len(entries) != 0 {
		t.Errorf("left temporary files: %v", entries)
	}
}

// privateGroup reports whether gid has no member and is no other
// account's primary group, as the proxy decides.
func privateGroup(t *testing.T, gid int) bool {
	t.Helper()
	data, err := os.ReadFile("/etc/passwd")
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Split(line, ":"); len(f) >= 4 && f[3] == strconv.Itoa(gid) {
			count++
		}
	}
	return count == 1
}
