package sourcetree

import (
	"os/exec"
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
