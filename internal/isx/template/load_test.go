package template

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/coded"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

type tree struct {
	home, search, project, work string
}

// newTree lays out a home, one search path and a project whose working
// directory is two levels below the project's .incus-spawn/.
func newTree(t *testing.T) tree {
	root := t.TempDir()
	tr := tree{
		home:    filepath.Join(root, "home"),
		search:  filepath.Join(root, "shared-templates"),
		project: filepath.Join(root, "src", "app"),
	}
	tr.work = filepath.Join(tr.project, "cmd", "server")
	for _, d := range []string{tr.home, tr.search, tr.work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

func (tr tree) options() Options {
	return Options{Home: tr.home, SearchPaths: []string{tr.search}, WorkDir: tr.work}
}

func (tr tree) user(t *testing.T, file, content string) string {
	p := filepath.Join(UserDir(tr.home), file)
	writeFile(t, p, content)
	return p
}

func (tr tree) projectLocal(t *testing.T, file, content string) string {
	p := filepath.Join(tr.project, ProjectDirName, file)
	writeFile(t, p, content)
	return p
}

func mustLoad(t *testing.T, opts Options) *Set {
	t.Helper()
	set, err := Load(opts)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func TestBuiltinTplDev(t *testing.T) {
	set := mustLoad(t, Options{Home: t.TempDir()})
	d, err := set.Get("tpl-dev")
	if err != nil {
		t.Fatal(err)
	}
	if d.Source != (Source{Kind: SourceBuiltin, Path: "builtin:tpl-dev.yaml", Trusted: true}) {
		t.Errorf("source %+v", d.Source)
	}
	if d.ImageAlias() != "isx/debian-12" || d.Description == "" || len(d.Run) == 0 {
		t.Errorf("tpl-dev: image %q description %q steps %d", d.Image, d.Description, len(d.Run))
	}
	claude, ok := d.Tool(ToolClaude)
	if !ok || claude.Model != "sonnet" {
		t.Errorf("claude tool %+v present %v", claude, ok)
	}
	// Built-ins build offline: no packages, nothing that fetches.
	for _, b := range set.Definitions() {
		if b.Source.Kind != SourceBuiltin {
			continue
		}
		if len(b.Packages) != 0 {
			t.Errorf("built-in %s installs packages %v", b.Name, b.Packages)
		}
		for _, s := range b.Run {
			for _, word := range []string{"apt", "curl", "wget", "git clone", "npm", "pip"} {
				if strings.Contains(s.Run, word) {
					t.Errorf("built-in %s step %q uses %s", b.Name, s.Run, word)
				}
			}
		}
		if err := set.Approvable(b.Name); err != nil {
			t.Errorf("built-in %s is not approvable: %v", b.Name, err)
		}
	}
}

func TestLoadSourcesAndTrust(t *testing.T) {
	tr := newTree(t)
	userFile := tr.user(t, "java.yaml", "name: tpl-java\nparent: tpl-dev\npackages: [maven]\n")
	searchFile := filepath.Join(tr.search, "go.yml")
	writeFile(t, searchFile, "name: tpl-go\nimage: isx/debian-12\n")
	oldLayout := filepath.Join(tr.search, "images", "rust.yaml")
	writeFile(t, oldLayout, "name: tpl-rust\nimage: isx/debian-12\n")
	localFile := tr.projectLocal(t, "x.yaml", "name: tpl-x\nparent: tpl-java\n")
	localOld := tr.projectLocal(t, "images/y.yaml", "name: tpl-y\nimage: ./y.tar.gz\n")
	// Not definitions: hidden files, other extensions, directories.
	writeFile(t, filepath.Join(UserDir(tr.home), ".#java.yaml"), "not: yaml: at all")
	writeFile(t, filepath.Join(UserDir(tr.home), "notes.txt"), "::")
	if err := os.MkdirAll(filepath.Join(UserDir(tr.home), "dir.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}

	set := mustLoad(t, tr.options())
	want := map[string]Source{
		"tpl-dev":  {Kind: SourceBuiltin, Path: "builtin:tpl-dev.yaml", Trusted: true},
		"tpl-java": {Kind: SourceUser, Path: userFile, Trusted: true},
		"tpl-go":   {Kind: SourceSearchPath, Path: searchFile, Trusted: true},
		"tpl-rust": {Kind: SourceSearchPath, Path: oldLayout, Trusted: true},
		"tpl-x":    {Kind: SourceProjectLocal, Path: localFile, Trusted: false},
		"tpl-y":    {Kind: SourceProjectLocal, Path: localOld, Trusted: false},
	}
	if got := strings.Join(set.Names(), ","); got != "tpl-dev,tpl-go,tpl-java,tpl-rust,tpl-x,tpl-y" {
		t.Fatalf("names %s", got)
	}
	for name, src := range want {
		d, err := set.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		if d.Source != src {
			t.Errorf("%s source %+v, want %+v", name, d.Source, src)
		}
		if d.ProjectLocal() != (src.Kind == SourceProjectLocal) {
			t.Errorf("%s ProjectLocal() = %v", name, d.ProjectLocal())
		}
	}
	y, _ := set.Get("tpl-y")
	if y.ImageFile != filepath.Join(tr.project, ProjectDirName, "images", "y.tar.gz") {
		t.Errorf("relative image resolved to %q", y.ImageFile)
	}
	if len(set.Warnings()) != 0 {
		t.Errorf("warnings %v", set.Warnings())
	}
}

func TestLoadWithoutWorkDirHasNoProjectLocal(t *testing.T) {
	tr := newTree(t)
	tr.projectLocal(t, "x.yaml", "name: tpl-x\nimage: isx/debian-12\n")
	set := mustLoad(t, Options{Home: tr.home})
	if _, err := set.Get("tpl-x"); coded.CodeOf(err) != CodeNotFound {
		t.Fatalf("project-local loaded without a working directory: %v", err)
	}
}

func TestFindProjectDirTakesTheNearest(t *testing.T) {
	tr := newTree(t)
	outer := filepath.Join(filepath.Dir(tr.project), ProjectDirName)
	if err := os.MkdirAll(outer, 0o755); err != nil {
		t.Fatal(err)
	}
	got, ok, err := FindProjectDir(tr.work)
	if err != nil || !ok || got != outer {
		t.Fatalf("got %q %v %v, want %q", got, ok, err, outer)
	}
	inner := filepath.Join(tr.project, ProjectDirName)
	if err := os.MkdirAll(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, ok, _ := FindProjectDir(tr.work); !ok || got != inner {
		t.Fatalf("got %q, want the nearer %q", got, inner)
	}
	// A file named .incus-spawn is not a definitions directory.
	writeFile(t, filepath.Join(tr.work, ProjectDirName), "")
	if got, _, _ := FindProjectDir(tr.work); got != inner {
		t.Fatalf("got %q, want %q", got, inner)
	}
}

// ISX-028: a trusted definition shadows a project-local one of the same
// name, and the shadowing is reported.
func TestTrustedShadowsProjectLocal(t *testing.T) {
	tr := newTree(t)
	userFile := tr.user(t, "a.yaml", "name: tpl-a\nimage: isx/debian-12\n")
	localFile := tr.projectLocal(t, "a.yaml", "name: tpl-a\nimage: evil/image\n")
	set := mustLoad(t, tr.options())
	d, _ := set.Get("tpl-a")
	if d.Source.Path != userFile || d.ProjectLocal() {
		t.Fatalf("winner %+v", d.Source)
	}
	w := set.Warnings()
	if len(w) != 1 || w[0].Code != WarningShadowed || w[0].File != localFile || !strings.Contains(w[0].Message, userFile) {
		t.Fatalf("warnings %+v", w)
	}
	if sh := set.Shadowed(); len(sh) != 1 || sh[0].Source.Path != localFile {
		t.Fatalf("shadowed %+v", sh)
	}
}

func TestEarlierTrustedSourceWins(t *testing.T) {
	tr := newTree(t)
	userFile := tr.user(t, "b.yaml", "name: tpl-b\nimage: isx/debian-12\n")
	searchFile := filepath.Join(tr.search, "b.yaml")
	writeFile(t, searchFile, "name: tpl-b\nimage: other\n")
	shadowBuiltin := tr.user(t, "dev.yaml", "name: tpl-dev\nimage: mine\n")
	set := mustLoad(t, tr.options())

	b, _ := set.Get("tpl-b")
	if b.Source.Path != userFile {
		t.Errorf("tpl-b from %s, want the user directory", b.Source.Path)
	}
	dev, _ := set.Get("tpl-dev")
	if dev.Source.Kind != SourceBuiltin {
		t.Errorf("tpl-dev from %s, want the built-in", dev.Source.Path)
	}
	files := map[string]bool{}
	for _, w := range set.Warnings() {
		if w.Code != WarningShadowed {
			t.Errorf("unexpected warning %+v", w)
		}
		files[w.File] = true
	}
	if !files[searchFile] || !files[shadowBuiltin] || len(files) != 2 {
		t.Errorf("warnings name %v", files)
	}
}

func TestSameSearchPathTwiceIsReadOnce(t *testing.T) {
	tr := newTree(t)
	writeFile(t, filepath.Join(tr.search, "b.yaml"), "name: tpl-b\nimage: x\n")
	opts := Options{Home: tr.home, SearchPaths: []string{tr.search, tr.search + "/", UserDir(tr.home)}}
	set := mustLoad(t, opts)
	if len(set.Warnings()) != 0 {
		t.Fatalf("warnings %v", set.Warnings())
	}
}

func TestMissingSearchPathIsAWarning(t *testing.T) {
	tr := newTree(t)
	missing := filepath.Join(tr.home, "nowhere")
	set := mustLoad(t, Options{Home: tr.home, SearchPaths: []string{missing}})
	w := set.Warnings()
	if len(w) != 1 || w[0].Code != WarningMissingSearchPath || !strings.Contains(w[0].Message, missing) {
		t.Fatalf("warnings %+v", w)
	}
}

// A file Load cannot use fails the load and is named; nothing is skipped.
func TestLoadErrorsNameTheFile(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, tr tree) string // returns the file to be named
		code  string
		text  string
	}{
		{"malformed user file", func(t *testing.T, tr tree) string {
			return tr.user(t, "bad.yaml", "name: tpl-bad\nimage: [\n")
		}, CodeInvalid, "not valid YAML"},
		{"unknown key in search path", func(t *testing.T, tr tree) string {
			p := filepath.Join(tr.search, "k.yaml")
			writeFile(t, p, "name: tpl-k\nimage: x\nbogus: 1\n")
			return p + ":3"
		}, CodeInvalid, "bogus"},
		{"malformed project-local file", func(t *testing.T, tr tree) string {
			return tr.projectLocal(t, "p.yaml", "name: tpl-p\n")
		}, CodeInvalid, "image"},
		{"dangling symlink", func(t *testing.T, tr tree) string {
			p := filepath.Join(UserDir(tr.home), "gone.yaml")
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(tr.home, "nothing"), p); err != nil {
				t.Fatal(err)
			}
			return p
		}, CodeUnreadable, "cannot be read"},
		{"same name twice in one directory", func(t *testing.T, tr tree) string {
			tr.user(t, "a.yaml", "name: tpl-a\nimage: x\n")
			return tr.user(t, "b.yaml", "name: tpl-a\nimage: y\n")
		}, CodeDuplicate, "a.yaml"},
		{"same name in .incus-spawn and its images/", func(t *testing.T, tr tree) string {
			tr.projectLocal(t, "a.yaml", "name: tpl-a\nimage: x\n")
			return tr.projectLocal(t, "images/a.yaml", "name: tpl-a\nimage: y\n")
		}, CodeDuplicate, "defined once per directory"},
		{"search path is a file", func(t *testing.T, tr tree) string {
			if err := os.RemoveAll(tr.search); err != nil {
				t.Fatal(err)
			}
			writeFile(t, tr.search, "")
			return tr.search
		}, CodeUnreadable, "cannot be read"},
		{"oversized file", func(t *testing.T, tr tree) string {
			return tr.user(t, "big.yaml", "name: t\nimage: x\ndescription: "+strings.Repeat("a", MaxFileSize)+"\n")
		}, CodeInvalid, "larger than"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := newTree(t)
			file := c.setup(t, tr)
			_, err := Load(tr.options())
			if err == nil {
				t.Fatal("Load succeeded")
			}
			if coded.CodeOf(err) != c.code || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), c.text) {
				t.Fatalf("got %v (code %s), want code %s naming %s and %q", err, coded.CodeOf(err), c.code, file, c.text)
			}
		})
	}
}

func TestLoadRefusesRelativeOptions(t *testing.T) {
	for _, opts := range []Options{
		{},
		{Home: "home"},
		{Home: "/h", WorkDir: "src"},
		{Home: "/h", SearchPaths: []string{"templates"}},
	} {
		if _, err := Load(opts); coded.CodeOf(err) != CodeBadOptions {
			t.Errorf("Load(%+v) = %v", opts, err)
		}
	}
}

func setOf(t *testing.T, defs ...*Definition) *Set {
	t.Helper()
	s, err := NewSet(defs...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func def(name, parent, image string, kind SourceKind) *Definition {
	return &Definition{Name: name, Parent: parent, Image: image,
		Source: Source{Kind: kind, Path: "/defs/" + name + ".yaml", Trusted: kind != SourceProjectLocal}}
}

func TestChainIsParentsFirst(t *testing.T) {
	tr := newTree(t)
	tr.user(t, "a.yaml", "name: tpl-a\nparent: tpl-dev\n")
	tr.user(t, "b.yaml", "name: tpl-b\nparent: tpl-a\n")
	set := mustLoad(t, tr.options())
	chain, err := set.Chain("tpl-b")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range chain {
		names = append(names, d.Name)
	}
	if strings.Join(names, ",") != "tpl-dev,tpl-a,tpl-b" {
		t.Fatalf("chain %v", names)
	}
	if chain[0].ImageAlias() != "isx/debian-12" {
		t.Errorf("root image %q", chain[0].Image)
	}
}

func TestChainErrors(t *testing.T) {
	tr := newTree(t)
	missingFile := tr.user(t, "m.yaml", "name: tpl-m\n\nparent: tpl-nowhere\n")
	tr.user(t, "n.yaml", "name: tpl-n\nparent: tpl-m\n")
	cycleFile := tr.user(t, "c1.yaml", "name: tpl-c1\nparent: tpl-c2\n")
	tr.user(t, "c2.yaml", "name: tpl-c2\nparent: tpl-c3\n")
	tr.user(t, "c3.yaml", "name: tpl-c3\nparent: tpl-c1\n")
	tr.user(t, "d.yaml", "name: tpl-d\nparent: tpl-c1\n")
	set := mustLoad(t, tr.options())

	_, err := set.Chain("tpl-m")
	if coded.CodeOf(err) != CodeMissingParent || !strings.HasPrefix(err.Error(), missingFile+":3: parent: ") || !strings.Contains(err.Error(), `"tpl-nowhere"`) {
		t.Errorf("missing parent: %v", err)
	}
	_, err = set.Chain("tpl-n")
	if coded.CodeOf(err) != CodeMissingParent || !strings.Contains(err.Error(), missingFile) || !strings.Contains(err.Error(), "tpl-n builds on tpl-m") {
		t.Errorf("missing grandparent: %v", err)
	}
	for _, name := range []string{"tpl-c1", "tpl-c2", "tpl-d"} {
		_, err = set.Chain(name)
		if coded.CodeOf(err) != CodeCycle {
			t.Fatalf("%s: %v", name, err)
		}
		for _, member := range []string{"tpl-c1", "tpl-c2", "tpl-c3"} {
			if !strings.Contains(err.Error(), member) {
				t.Errorf("%s: cycle error %q does not name %s", name, err, member)
			}
		}
		if name == "tpl-d" && strings.Contains(err.Error(), "tpl-d ") {
			t.Errorf("tpl-d is not in the cycle: %v", err)
		}
	}
	_, err = set.Chain("tpl-c1")
	if !strings.Contains(err.Error(), "tpl-c1 → tpl-c2 → tpl-c3 → tpl-c1") || !strings.Contains(err.Error(), filepath.Dir(cycleFile)) {
		t.Errorf("cycle message %v", err)
	}
	if _, err := set.ChainHash("tpl-c1"); coded.CodeOf(err) != CodeCycle {
		t.Errorf("ChainHash of a cycle: %v", err)
	}
	if _, err := set.Chain("tpl-unknown"); coded.CodeOf(err) != CodeNotFound {
		t.Errorf("unknown: %v", err)
	}

	rootless := setOf(t, def("tpl-r", "", "", SourceUser), def("tpl-s", "tpl-r", "", SourceUser))
	_, err = rootless.Chain("tpl-s")
	if coded.CodeOf(err) != CodeNoRootImage || !strings.Contains(err.Error(), "/defs/tpl-r.yaml") {
		t.Errorf("no root image: %v", err)
	}
}

func TestChainHashCoversParents(t *testing.T) {
	build := func(parentPackages string) (string, string) {
		s := setOf(t,
			&Definition{Name: "tpl-p", Image: "isx/debian-12", Packages: []string{parentPackages}, Source: Source{Kind: SourceUser, Trusted: true}},
			&Definition{Name: "tpl-c", Parent: "tpl-p", Source: Source{Kind: SourceUser, Trusted: true}},
		)
		h, err := s.ChainHash("tpl-c")
		if err != nil {
			t.Fatal(err)
		}
		c, _ := s.Get("tpl-c")
		return h, c.Hash()
	}
	h1, own1 := build("jq")
	h2, own2 := build("git")
	if own1 != own2 {
		t.Fatal("the child's own hash should not change")
	}
	if h1 == h2 {
		t.Fatal("a changed parent does not change the child's chain hash")
	}
	h3, _ := build("jq")
	if h1 != h3 {
		t.Fatal("chain hash is not stable")
	}
}

// ISX-028, ISX-029 (parsing level): a project-local definition, and a
// trusted one whose chain contains one, can never be used through MCP.
func TestApprovable(t *testing.T) {
	tr := newTree(t)
	tr.user(t, "ok.yaml", "name: tpl-ok\nparent: tpl-dev\n")
	tr.user(t, "on-local.yaml", "name: tpl-on-local\nparent: tpl-local-base\n")
	localBase := tr.projectLocal(t, "base.yaml", "name: tpl-local-base\nimage: isx/debian-12\n")
	local := tr.projectLocal(t, "x.yaml", "name: tpl-x\nparent: tpl-dev\n")
	set := mustLoad(t, tr.options())

	for _, name := range []string{"tpl-dev", "tpl-ok"} {
		if err := set.Approvable(name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	err := set.Approvable("tpl-x")
	if coded.CodeOf(err) != CodeNotApproved || !strings.Contains(err.Error(), local) ||
		!strings.Contains(err.Error(), "project-local definitions can never be used through MCP") {
		t.Errorf("project-local: %v", err)
	}
	err = set.Approvable("tpl-on-local")
	if coded.CodeOf(err) != CodeNotApproved || !strings.Contains(err.Error(), localBase) || !strings.Contains(err.Error(), "tpl-local-base") {
		t.Errorf("trusted on project-local parent: %v", err)
	}
	if !errors.Is(err, &coded.Error{Code: CodeNotApproved}) {
		t.Error("errors.Is by code")
	}
	if err := set.Approvable("tpl-none"); coded.CodeOf(err) != CodeNotFound {
		t.Errorf("unknown: %v", err)
	}

	for name, want := range map[string]SourceKind{
		"tpl-dev": SourceBuiltin, "tpl-ok": SourceUser, "tpl-x": SourceProjectLocal, "tpl-on-local": SourceProjectLocal,
	} {
		if got, err := set.EffectiveSource(name); err != nil || got != want {
			t.Errorf("EffectiveSource(%s) = %s, %v; want %s", name, got, err, want)
		}
	}
}

// Trust comes from the kind of source, not from a flag someone set.
func TestProjectLocalIsNeverTrusted(t *testing.T) {
	forged := &Definition{Name: "tpl-f", Image: "x", Source: Source{Kind: SourceProjectLocal, Trusted: true}}
	plain := &Definition{Name: "tpl-p", Image: "x"} // as Parse returns it
	set := setOf(t, forged, plain)
	if coded.CodeOf(set.Approvable("tpl-f")) != CodeNotApproved || coded.CodeOf(set.Approvable("tpl-p")) != CodeNotApproved {
		t.Fatal("an untrusted definition was approvable")
	}
	trusted := &Definition{Name: "tpl-f", Image: "y", Source: Source{Kind: SourceUser, Trusted: true}}
	set = setOf(t, forged, trusted)
	if d, _ := set.Get("tpl-f"); d != trusted {
		t.Fatal("a forged project-local definition beat a trusted one")
	}
}

func TestNewSetRefusesTwoUntrustedOfOneName(t *testing.T) {
	a := def("tpl-a", "", "x", SourceProjectLocal)
	b := def("tpl-a", "", "y", SourceProjectLocal)
	b.Source.Path = "/other/tpl-a.yaml"
	if _, err := NewSet(a, b); coded.CodeOf(err) != CodeDuplicate || !strings.Contains(err.Error(), "/other/tpl-a.yaml") {
		t.Fatalf("got %v", err)
	}
}
