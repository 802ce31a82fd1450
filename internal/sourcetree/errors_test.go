package sourcetree

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Both programs carry a failure one way: a coded error (internal/coded),
// which a wire translates once by its code. So every type of this module
// that is an error (has an Error() string method) embeds coded.Base, or a
// type that does, save the few below that are not failures of a domain.
var uncodedErrors = map[string]string{
	"internal/coded.Error": "it is the idiom itself",
	"internal/usage.Error": "it marks a command line the program cannot read, for the exit status 2, " +
		"whatever error it carries",
	"cmd/isx.exitError":                       "it carries the exit status of a command isx ran, to be isx's own",
	"internal/isx/proxy/proxytest.buildError": "a test kit's failure to build its client, for the test's log",
}

func TestDomainErrorsAreCoded(t *testing.T) {
	tree := readTypes(t, moduleRootForTest(t))
	if len(tree.errorTypes) < 20 {
		t.Fatalf("found %d error types; the walk is broken", len(tree.errorTypes))
	}
	for _, name := range tree.errorTypes {
		if _, excused := uncodedErrors[name]; excused {
			continue
		}
		if !tree.coded(name, 0) {
			t.Errorf("%s is an error that does not embed coded.Base: make it a coded error, "+
				"so that the wire translates it by its code", name)
		}
	}
	for name := range uncodedErrors {
		if !slices.Contains(tree.errorTypes, name) {
			t.Errorf("%s is excused from the rule but is no error type any more: drop it from the list", name)
		}
	}
}

// The rule finds what it is for: a type that wraps a cause by hand.
func TestDomainErrorsRuleFindsAnUncodedError(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "go.mod"), "module example.com/m\n")
	writeFile(t, filepath.Join(dir, "internal/coded/coded.go"), "package coded\ntype Error struct{ Code string }\ntype Base = Error\n"+
		"func (e *Error) Error() string { return e.Code }\n")
	writeFile(t, filepath.Join(dir, "internal/shelf/shelf.go"), "package shelf\nimport \"example.com/m/internal/coded\"\n"+
		"type Error struct{ coded.Base; Shelf string }\nfunc (e *Error) Error() string { return e.Shelf }\n"+
		"type StockError struct{ Error }\n"+
		"type lostError struct{ err error }\nfunc (e *lostError) Error() string { return e.err.Error() }\n"+
		"func (e *StockError) Error() string { return \"\" }\n")
	tree := readTypes(t, dir)
	for name, want := range map[string]bool{
		"internal/shelf.Error": true, "internal/shelf.StockError": true, "internal/shelf.lostError": false,
	} {
		if !slices.Contains(tree.errorTypes, name) {
			t.Errorf("%s is not found as an error type (found %v)", name, tree.errorTypes)
		}
		if got := tree.coded(name, 0); got != want {
			t.Errorf("%s coded = %v, want %v", name, got, want)
		}
	}
}

// types is what the rule needs of the source: each struct type's embedded
// types, by package-qualified name, and which types have an Error method.
type types struct {
	embeds     map[string][]string
	errorTypes []string
}

func readTypes(t *testing.T, root string) *types {
	t.Helper()
	module := modulePath(t, root)
	tree := &types{embeds: map[string][]string{}}
	err := filepath.WalkDir(root, func(file string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") && file != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(file, ".go") || strings.HasSuffix(file, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(file))
		if err != nil {
			return err
		}
		return tree.readFile(file, filepath.ToSlash(rel), module)
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(tree.errorTypes)
	return tree
}

func (tree *types) readFile(file, pkg, module string) error {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
	if err != nil {
		return err
	}
	imports := map[string]string{}
	for _, spec := range f.Imports {
		p, _ := strconv.Unquote(spec.Path.Value)
		name := path.Base(p)
		if spec.Name != nil {
			name = spec.Name.Name
		}
		if rel, ok := strings.CutPrefix(p, module+"/"); ok {
			imports[name] = rel
		}
	}
	for _, decl := range f.Decls {
		switch decl := decl.(type) {
		case *ast.GenDecl:
			tree.readTypeSpecs(decl, pkg, imports)
		case *ast.FuncDecl:
			if name, ok := errorMethodOf(decl); ok {
				tree.errorTypes = append(tree.errorTypes, pkg+"."+name)
			}
		}
	}
	return nil
}

func (tree *types) readTypeSpecs(decl *ast.GenDecl, pkg string, imports map[string]string) {
	for _, spec := range decl.Specs {
		ts, ok := spec.(*ast.TypeSpec)
		if !ok {
			continue
		}
		name := pkg + "." + ts.Name.Name
		if ts.Assign.IsValid() { // an alias is the type it names
			tree.embeds[name] = append(tree.embeds[name], qualified(ts.Type, pkg, imports))
			continue
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			continue
		}
		for _, field := range st.Fields.List {
			if len(field.Names) == 0 {
				tree.embeds[name] = append(tree.embeds[name], qualified(field.Type, pkg, imports))
			}
		}
	}
}

// errorMethodOf names the receiver's type of a method Error() string.
func errorMethodOf(fn *ast.FuncDecl) (string, bool) {
	if fn.Recv == nil || fn.Name.Name != "Error" || fn.Type.Params.NumFields() != 0 || fn.Type.Results.NumFields() != 1 {
		return "", false
	}
	if result, ok := fn.Type.Results.List[0].Type.(*ast.Ident); !ok || result.Name != "string" {
		return "", false
	}
	recv := fn.Recv.List[0].Type
	if star, ok := recv.(*ast.StarExpr); ok {
		recv = star.X
	}
	ident, ok := recv.(*ast.Ident)
	return ident.Name, ok
}

// qualified names a type expression the way embeds keys it.
func qualified(expr ast.Expr, pkg string, imports map[string]string) string {
	if star, ok := expr.(*ast.StarExpr); ok {
		expr = star.X
	}
	switch e := expr.(type) {
	case *ast.Ident:
		return pkg + "." + e.Name
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok && imports[x.Name] != "" {
			return imports[x.Name] + "." + e.Sel.Name
		}
	}
	return ""
}

// coded reports whether name is coded.Error or embeds, at some depth, a
// type that is.
func (tree *types) coded(name string, depth int) bool {
	if name == "internal/coded.Error" {
		return true
	}
	if depth > 8 {
		return false
	}
	return slices.ContainsFunc(tree.embeds[name], func(inner string) bool { return tree.coded(inner, depth+1) })
}

func modulePath(t *testing.T, root string) string {
	t.Helper()
	data := readFile(t, filepath.Join(root, "go.mod"))
	for _, line := range strings.Split(data, "\n") {
		if rest, ok := strings.CutPrefix(line, "module "); ok {
			return strings.TrimSpace(rest)
		}
	}
	t.Fatalf("%s/go.mod names no module", root)
	return ""
}

func writeFile(t *testing.T, file, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
