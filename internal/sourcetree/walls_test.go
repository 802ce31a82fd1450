package sourcetree

import (
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The two programs share only the kit at the top of internal/: neither wing
// imports the other, and actiond's engine never imports its endpoint. These
// walls are checked here so that no review has to notice a stray import.
func TestWingsDoNotImportEachOther(t *testing.T) {
	root := moduleRootForTest(t)
	module := goList(t, root, "-m")
	walls := []struct {
		from, forbidden, why string
	}{
		{"./cmd/isx", module + "/internal/actiond/", "isx must not depend on actiond"},
		{"./cmd/actiond", module + "/internal/isx/", "actiond must not depend on isx"},
		{"./internal/actiond/engine", module + "/internal/actiond/gateway", "the engine must not import the endpoint it serves"},
		// The general JSON Schema validator compiles every draft's
		// meta-schema when it loads, some 6 ms that every isx command
		// would pay; isx checks its tool schemas with mcpkit's own checker.
		{"./cmd/isx", "github.com/santhosh-tekuri/jsonschema/", "isx must start without the general JSON Schema validator"},
	}
	for _, wall := range walls {
		deps := strings.Fields(goList(t, root, "-deps", wall.from))
		if len(deps) == 0 {
			t.Fatalf("go list -deps %s listed nothing", wall.from)
		}
		for _, dep := range deps {
			if dep == strings.TrimSuffix(wall.forbidden, "/") || strings.HasPrefix(dep, wall.forbidden) {
				t.Errorf("%s depends on %s: %s", wall.from, dep, wall.why)
			}
		}
	}
}

// The shared kit imports neither wing.
func TestSharedKitImportsNoWing(t *testing.T) {
	root := moduleRootForTest(t)
	module := goList(t, root, "-m")
	kit := strings.Fields(goList(t, root, "./internal/..."))
	for _, pkg := range kit {
		if strings.HasPrefix(pkg, module+"/internal/isx/") || strings.HasPrefix(pkg, module+"/internal/actiond/") {
			continue
		}
		for _, dep := range strings.Fields(goList(t, root, "-deps", pkg)) {
			if strings.HasPrefix(dep, module+"/internal/isx/") || strings.HasPrefix(dep, module+"/internal/actiond/") {
				t.Errorf("the shared package %s depends on %s, which belongs to one wing", pkg, dep)
			}
		}
	}
}

// Only the command `isx mcp` serves MCP: the TUI, the rest of the CLI and
// every other package reach the domain of MCP instances through
// internal/isx/holding, never through the tool surface. The command lives
// in package main beside the app it shares with every other command (the
// workspace it opens, the proxy it starts, the clock), so the rule is
// per file there: only cmd/isx/mcp.go may import the server. Everywhere
// else it is per package, dependencies of any depth and the packages'
// tests' imports included.
func TestOnlyTheMCPCommandImportsTheMCPServer(t *testing.T) {
	root := moduleRootForTest(t)
	module := goList(t, root, "-m")
	server := module + "/internal/isx/mcpserver"
	command := module + "/cmd/isx"
	listing := goList(t, root, "-f", "{{.ImportPath}} {{join .Deps \" \"}} {{join .TestImports \" \"}} {{join .XTestImports \" \"}}", "./...")
	for _, line := range strings.Split(listing, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		pkg := fields[0]
		if pkg == server || pkg == command || strings.HasPrefix(pkg, server+"/") {
			continue
		}
		if slices.Contains(fields[1:], server) {
			t.Errorf("%s depends on %s: only `isx mcp`'s command (cmd/isx/mcp.go) may; use internal/isx/holding", pkg, server)
		}
	}
	for _, file := range importersIn(t, filepath.Join(root, "cmd", "isx"), server) {
		if file != "mcp.go" {
			t.Errorf("cmd/isx/%s imports %s: only `isx mcp`'s command (mcp.go) may; use internal/isx/holding", file, server)
		}
	}
}

// The shared test kit is for tests: only test files and the test kits
// (packages named …test, and what lies under them) may depend on it, so
// that nothing of it ever ships in either program.
func TestTestKitOnlyInTests(t *testing.T) {
	root := moduleRootForTest(t)
	module := goList(t, root, "-m")
	kit := module + "/internal/testkit"
	listing := goList(t, root, "-f", "{{.ImportPath}} {{join .Deps \" \"}}", "./...")
	for _, line := range strings.Split(listing, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || fields[0] == kit || isTestKit(fields[0]) {
			continue
		}
		if slices.Contains(fields[1:], kit) {
			t.Errorf("%s depends on %s, which only tests and test kits may use", fields[0], kit)
		}
	}
}

// isTestKit reports whether a package is, or lies under, a test kit.
func isTestKit(pkg string) bool {
	return slices.ContainsFunc(strings.Split(pkg, "/"), func(part string) bool { return strings.HasSuffix(part, "test") })
}

// importersIn names the Go files of dir that import pkg.
func importersIn(t *testing.T, dir, pkg string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	var out []string
	for _, path := range files {
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, spec := range f.Imports {
			if p, err := strconv.Unquote(spec.Path.Value); err == nil && p == pkg {
				out = append(out, filepath.Base(path))
			}
		}
	}
	return out
}

func moduleRootForTest(t *testing.T) string {
	t.Helper()
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func goList(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}
