package config

import (
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/incusspawn/isx/internal/isx/template"
	"github.com/incusspawn/isx/internal/isx/yamltree"
)

// CoordinatorHost is the name the host proxy serves isx mcp at inside a
// coordinator instance; no host route may take it.
const CoordinatorHost = "mcp.isx.internal"

// HostRoutesDir holds the routes' secrets, one file per route.
func HostRoutesDir(home string) string {
	return filepath.Join(Dir(home), "host-routes")
}

// RouteSecretPath is the file of a route's own secret, which the proxy
// sends the controller as X-Isx-Route-Secret.
func RouteSecretPath(home, name string) string {
	return filepath.Join(HostRoutesDir(home), name+".secret")
}

var routeNamePattern = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]*[a-z0-9])?\.)+internal$`)

// loopbackHosts are the only hosts a route's target may name: this
// host's loopback, which no instance reaches but through the proxy.
var loopbackHosts = map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true}

// checkRoute says what is wrong with the contents of a route whose shape
// is right, naming the setting, or nil.
func (r *nodeReader) checkRoute(route HostRoute, key string) error {
	field := yamltree.Join(key, route.Name)
	switch {
	case len(route.Name) > 253 || !routeNamePattern.MatchString(route.Name):
		return invalidf(r.File, route.Line, field, "%q is not a route name: it must be a lowercase host name ending in .internal, like work.isx.internal", route.Name)
	case route.Name == CoordinatorHost:
		return invalidf(r.File, route.Line, field, "%s is where coordinator instances reach isx mcp; give the route another name", CoordinatorHost)
	}
	if err := checkTarget(route.Target); err != "" {
		return invalidf(r.File, route.Line, yamltree.Join(field, "target"), "%s", err)
	}
	if len(route.Templates) == 0 {
		return invalidf(r.File, route.Line, yamltree.Join(field, "templates"), "is required and must list at least one template: only instances of these templates may call the route")
	}
	for _, name := range route.Templates {
		if bad := template.CheckName(name); bad != nil {
			return invalidf(r.File, route.Line, yamltree.Join(field, "templates"), "%s", bad.Error())
		}
	}
	return nil
}

// checkTarget says why target is not host:port on this host's loopback,
// or "".
func checkTarget(target string) string {
	if target == "" {
		return "is required: the host:port of the program on this host's loopback, like 127.0.0.1:7070"
	}
	host, port, err := net.SplitHostPort(target)
	if err != nil || strings.Contains(target, "/") {
		return strconv.Quote(target) + " is not host:port; give the program's address on this host's loopback, like 127.0.0.1:7070 or [::1]:7070"
	}
	if !loopbackHosts[strings.ToLower(host)] {
		return strconv.Quote(target) + " is not on this host's loopback: the host must be localhost, 127.0.0.1 or [::1]"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return strconv.Quote(target) + " has no port between 1 and 65535"
	}
	return ""
}
