package yamltree_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/yamltree"
)

const file = "/etc/isx/settings.yaml"

// walk reads data as a tree of mappings and lists of text, the way the
// packages using yamltree do, and returns the first problem found.
func walk(r *yamltree.Reader, data string, known []string) error {
	_, root, err := r.Document([]byte(data))
	if err != nil || root == nil {
		return err
	}
	return r.Mapping(root, "", known, func(name string, _, v *yaml.Node) error {
		return value(r, v, name)
	})
}

func value(r *yamltree.Reader, v *yaml.Node, key string) error {
	switch v.Kind {
	case yaml.MappingNode:
		return r.Mapping(v, key, nil, func(name string, _, item *yaml.Node) error {
			return value(r, item, yamltree.Join(key, name))
		})
	case yaml.SequenceNode:
		items, err := r.List(v, key)
		for i, item := range items {
			if err == nil {
				err = value(r, item, yamltree.Index(key, i))
			}
		}
		return err
	}
	_, err := r.Text(v, key)
	return err
}

// problem asserts that err is a *yamltree.Error at line and key whose
// message contains want.
func problem(t *testing.T, err error, line int, key, want string) *yamltree.Error {
	t.Helper()
	var e *yamltree.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want a *yamltree.Error", err, err)
	}
	if e.File != file || e.Line != line || e.Key != key || !strings.Contains(e.Message, want) {
		t.Fatalf("error %+v, want line %d key %q message containing %q", e, line, key, want)
	}
	return e
}

func TestDocumentEmpty(t *testing.T) {
	r := &yamltree.Reader{File: file}
	for _, c := range []struct {
		data    string
		wantDoc bool
	}{
		{"", false},
		{"# only a comment\n", false},
		{"---\n", true},
		{"~\n", true},
		{"null\n", true},
	} {
		doc, root, err := r.Document([]byte(c.data))
		if err != nil || root != nil || (doc != nil) != c.wantDoc {
			t.Errorf("%q: doc %v root %v err %v; want no root and a document %v", c.data, doc, root, err, c.wantDoc)
		}
	}
	doc, root, err := r.Document([]byte("# kept\na: 1\n"))
	if err != nil || root == nil || root.Kind != yaml.MappingNode || doc.Content[0] != root {
		t.Fatalf("doc %v root %v err %v; want the mapping as root of the document", doc, root, err)
	}
}

// A second document is refused at the line it starts on, with the advice
// the caller gives or "keep one".
func TestDocumentSecond(t *testing.T) {
	data := []byte("a: 1\n---\nb: 2\n")
	_, _, err := (&yamltree.Reader{File: file}).Document(data)
	e := problem(t, err, 2, "", "holds more than one YAML document (a second --- line); keep one")
	if e.Error() != file+":2: "+e.Message {
		t.Errorf("Error() = %q", e.Error())
	}
	_, _, err = (&yamltree.Reader{File: file, SecondDocument: "split the file"}).Document(data)
	problem(t, err, 2, "", "; split the file")
}

// ISX-007: a file that is not valid YAML names the line at fault. yaml.v3
// counts a parser error's line from 0 and a scanner error's from 1; the
// reader reports both from 1.
func TestSyntaxErrorLines(t *testing.T) {
	r := &yamltree.Reader{File: file}
	for _, c := range []struct {
		data string
		line int
		want string
	}{
		{"a: [x\n", 2, "did not find expected ',' or ']'"},
		{"a: 1\n}\n", 2, "did not find expected key"},
		{"- a\nb: c\n", 2, "did not find expected '-' indicator"},
		{"}\n", 1, "did not find expected node content"},
		{"a: 1\n  b: 2\n", 2, "mapping values are not allowed in this context"},
		{"a:\n\tb: 1\n", 2, "found character that cannot start any token"},
		{"a: 1\nb\nc: 2\n", 2, "could not find expected ':'"},
	} {
		_, _, err := r.Document([]byte(c.data))
		e := problem(t, err, c.line, "", "is not valid YAML: "+c.want)
		if e.Err == nil || !strings.HasPrefix(e.Err.Error(), "yaml: ") || errors.Unwrap(e) != e.Err {
			t.Errorf("%q: Err = %v, want yaml.v3's own error, unwrapped", c.data, e.Err)
		}
	}
}

// Aliases are refused wherever they stand: as a value, a list item or a
// key, so that a small file cannot expand into a huge tree.
func TestAliases(t *testing.T) {
	r := &yamltree.Reader{File: file}
	problem(t, walk(r, "a: &x 1\nb: *x\n", nil), 2, "b", "YAML aliases (*x) are not supported; write the value out")
	problem(t, walk(r, "a: &x 1\nb: [1, *x]\n", nil), 2, "b[1]", "YAML aliases (*x) are not supported")
	problem(t, walk(r, "&k a: 1\n*k : 2\n", nil), 2, "", "a key must be plain text, not an alias")
	problem(t, walk(r, "a: &x [*x]\n", nil), 1, "a[0]", "YAML aliases")
}

// Tags beyond YAML's own scalar types are refused; the core ones are text.
func TestTags(t *testing.T) {
	r := &yamltree.Reader{File: file}
	problem(t, walk(r, "a: !!binary aGk=\n", nil), 1, "a", "YAML tag !!binary is not supported; write plain text")
	problem(t, walk(r, "a:\n  - !secret x\n", nil), 2, "a[0]", "YAML tag !secret is not supported")
	problem(t, walk(r, "!custom x\n", nil), 1, "", "YAML tag !custom")
	if err := walk(r, "a: !!str 1\nb: !!int 2\nc: 2024-01-02\nd: 1.5\ne: true\nf: ~\n", nil); err != nil {
		t.Fatalf("core tags refused: %v", err)
	}
}

func TestMergeKeys(t *testing.T) {
	r := &yamltree.Reader{File: file}
	problem(t, walk(r, "env:\n  <<: {A: b}\n", nil), 2, "env.<<", "merge keys (<<) are not supported; write the keys out")
}

func TestDuplicateKeys(t *testing.T) {
	r := &yamltree.Reader{File: file}
	problem(t, walk(r, "a: 1\nb:\n  c: 1\n  c: 2\n", nil), 4, "b.c", `key "c" appears twice (first on line 3); keep one`)
}

// ISX-008: an unknown key is named, with its full path, and the keys
// allowed there are listed in order.
func TestUnknownKeys(t *testing.T) {
	r := &yamltree.Reader{File: file}
	known := []string{"templates", "max-instances", "codex"}
	problem(t, walk(r, "templates: []\nmax-instancs: 3\n", known), 2, "max-instancs",
		`unknown key "max-instancs" (did you mean max-instances?); the keys allowed here are codex, max-instances, templates`)
	if known[0] != "templates" {
		t.Errorf("known keys reordered in place: %v", known)
	}
	_, root, _ := r.Document([]byte("codex:\n  sandbox: x\n"))
	err := r.Mapping(root, "", known, func(name string, _, v *yaml.Node) error {
		return r.Mapping(v, name, []string{"sandbox-mode"}, func(string, *yaml.Node, *yaml.Node) error { return nil })
	})
	problem(t, err, 2, "codex.sandbox", `unknown key "sandbox"; the keys allowed here are sandbox-mode`)
}

// ISX-023: the hint explains a retired key instead of listing the keys;
// for any other unknown key it says nothing and the list stands.
func TestUnknownKeyHint(t *testing.T) {
	r := &yamltree.Reader{File: file, Hint: func(key string) string {
		if strings.Contains(key, "max-turns") {
			return "turn limits are no longer supported; delete the line"
		}
		return ""
	}}
	known := []string{"templates"}
	problem(t, walk(r, "delegate-max-turns: 200\n", known), 1, "delegate-max-turns",
		`unknown key "delegate-max-turns": turn limits are no longer supported; delete the line`)
	problem(t, walk(r, "tempaltes: []\n", known), 1, "tempaltes", `unknown key "tempaltes" (did you mean templates?); the keys allowed here are templates`)
}

func TestMappingShapes(t *testing.T) {
	r := &yamltree.Reader{File: file}
	problem(t, walk(r, "x\n", nil), 1, "", `must be a mapping of keys to values, not "x"`)
	problem(t, walk(r, "- a\n", nil), 1, "", "must be a mapping of keys to values, not a list")
	problem(t, walk(r, "? [a]\n: b\n", nil), 1, "", "a key must be plain text, not a list")
	_, root, _ := r.Document([]byte("a: ~\nb: [x]\n"))
	var calls []string
	err := r.Mapping(root, "", nil, func(name string, _, v *yaml.Node) error {
		calls = append(calls, name)
		return r.Mapping(v, name, nil, func(string, *yaml.Node, *yaml.Node) error { return nil })
	})
	problem(t, err, 2, "b", "must be a mapping of keys to values, not a list")
	if strings.Join(calls, ",") != "a,b" {
		t.Errorf("visited %v, want a null mapping taken as empty, then b", calls)
	}
}

func TestListAndText(t *testing.T) {
	r := &yamltree.Reader{File: file}
	_, root, _ := r.Document([]byte("none: ~\nsome: [a, 2, ~]\nword: x\nmap: {a: b}\n"))
	node := func(key string) *yaml.Node {
		for i := 0; i < len(root.Content); i += 2 {
			if root.Content[i].Value == key {
				return root.Content[i+1]
			}
		}
		t.Fatalf("no key %s", key)
		return nil
	}
	if items, err := r.List(node("none"), "none"); items != nil || err != nil {
		t.Errorf("List(null) = %v, %v; want an empty list", items, err)
	}
	items, err := r.List(node("some"), "some")
	if err != nil || len(items) != 3 {
		t.Fatalf("List = %v, %v", items, err)
	}
	var texts []string
	for i, item := range items {
		s, err := r.Text(item, yamltree.Index("some", i))
		if err != nil {
			t.Fatal(err)
		}
		texts = append(texts, s)
	}
	if fmt.Sprintf("%q", texts) != `["a" "2" ""]` {
		t.Errorf("texts %q; want numbers as written and null as empty", texts)
	}
	_, err = r.List(node("word"), "word")
	problem(t, err, 3, "word", `must be a list, not "x"`)
	_, err = r.Text(node("map"), "map")
	problem(t, err, 4, "map", "must be text, not a mapping")
}

type ownError struct{ where string }

func (e *ownError) Error() string { return e.where }

// NewError turns every problem the reader finds into the caller's type,
// while errors from the caller's own callbacks pass through untouched.
func TestNewError(t *testing.T) {
	r := &yamltree.Reader{File: file, NewError: func(e *yamltree.Error) error {
		return &ownError{where: fmt.Sprintf("%s|%d|%s|%s", e.File, e.Line, e.Key, e.Message)}
	}}
	for data, want := range map[string]string{
		"a: [x\n":         file + "|2||is not valid YAML",
		"a: 1\n---\n":     file + "|2||holds more than one",
		"a: 1\na: 2\n":    file + "|2|a|key \"a\" appears twice",
		"a: !!binary x\n": file + "|1|a|YAML tag",
	} {
		err := walk(r, data, nil)
		var own *ownError
		if !errors.As(err, &own) || !strings.HasPrefix(own.where, want) {
			t.Errorf("%q: %v (%T), want an *ownError starting %q", data, err, err, want)
		}
	}
	_, root, _ := r.Document([]byte("a: 1\n"))
	sentinel := errors.New("from the callback")
	if err := r.Mapping(root, "", nil, func(string, *yaml.Node, *yaml.Node) error { return sentinel }); err != sentinel {
		t.Errorf("callback error came back as %v", err)
	}
}

func TestErrorText(t *testing.T) {
	for _, c := range []struct {
		e    yamltree.Error
		want string
	}{
		{yamltree.Error{Base: coded.Base{Message: "m"}, Place: yamltree.Place{File: "/f", Line: 3, Key: "a.b"}}, "/f:3: a.b: m"},
		{yamltree.Error{Base: coded.Base{Message: "m"}, Place: yamltree.Place{File: "/f", Key: "a"}}, "/f: a: m"},
		{yamltree.Error{Base: coded.Base{Message: "m"}, Place: yamltree.Place{File: "/f", Line: 1}}, "/f:1: m"},
		{yamltree.Error{Base: coded.Base{Message: "m"}, Place: yamltree.Place{Key: "a"}}, "a: m"},
	} {
		if got := c.e.Error(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.e, got, c.want)
		}
	}
}

func TestDescribe(t *testing.T) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte("[{a: b}, [c], x, ~, '', &n y, *n]"), &doc); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range doc.Content[0].Content {
		got = append(got, yamltree.Describe(n))
	}
	want := `a mapping|a list|"x"|empty|""|"y"|an alias`
	if strings.Join(got, "|") != want {
		t.Errorf("Describe: %s, want %s", strings.Join(got, "|"), want)
	}
	if yamltree.Join("", "a") != "a" || yamltree.Join("a", "b") != "a.b" || yamltree.Index("a.b", 2) != "a.b[2]" {
		t.Error("Join or Index builds the wrong path")
	}
}

func TestScannerErrorOnFirstLineNamesLineOne(t *testing.T) {
	r := &yamltree.Reader{File: "x.yaml"}
	_, _, err := r.Document([]byte("a: b: c\n"))
	var yerr *yamltree.Error
	if !errors.As(err, &yerr) {
		t.Fatalf("got %v, want a *yamltree.Error", err)
	}
	if yerr.Line != 1 {
		t.Fatalf("line = %d, want 1 (%v)", yerr.Line, err)
	}
}
