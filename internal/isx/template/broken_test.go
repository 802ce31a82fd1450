package template

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/coded"
)

// Under KeepGoing one bad file does not stop the others: the good
// definitions load, the bad file is listed with its error, and the name it
// defines (read as far as the file allows) cannot be used, not even from a
// later source.
func TestKeepGoingKeepsTheGoodDefinitions(t *testing.T) {
	tr := newTree(t)
	unknownKey := tr.user(t, "bad.yaml", "name: tpl-bad\nimage: isx/busybox\nimgae: x\n")
	malformed := tr.user(t, "worse.yaml", "name: tpl-worse\nimage: [isx/busybox\n")
	nameless := tr.user(t, "nameless.yaml", "image: [\n")
	tr.user(t, "good.yaml", "name: tpl-good\nimage: isx/busybox\n")
	writeFile(t, filepath.Join(tr.search, "bad.yaml"), "name: tpl-bad\nimage: isx/busybox\n")
	writeFile(t, filepath.Join(tr.search, "child.yaml"), "name: tpl-child\nparent: tpl-worse\n")
	opts := tr.options()

	if _, err := Load(opts); err == nil {
		t.Fatal("without KeepGoing a bad file must fail the load")
	}
	opts.KeepGoing = true
	set, err := Load(opts)
	if err != nil {
		t.Fatal(err)
	}
	names := set.Names()
	if !slices.Contains(names, "tpl-good") || !slices.Contains(names, "tpl-dev") || slices.Contains(names, "tpl-bad") || slices.Contains(names, "tpl-worse") {
		t.Errorf("names %v", names)
	}
	broken := map[string]Broken{}
	for _, b := range set.Broken() {
		broken[b.File] = b
	}
	for file, name := range map[string]string{unknownKey: "tpl-bad", malformed: "tpl-worse", nameless: ""} {
		if b, ok := broken[file]; !ok || b.Name != name || b.Kind != SourceUser || !strings.Contains(b.Err.Error(), file) {
			t.Errorf("broken %s: %+v", file, b)
		}
	}
	_, err = set.Get("tpl-bad")
	if coded.CodeOf(err) != CodeInvalid || !strings.Contains(err.Error(), unknownKey+":3") || !strings.Contains(err.Error(), "imgae") {
		t.Errorf("Get of a broken name: %v", err)
	}
	shadowed := false
	for _, w := range set.Warnings() {
		shadowed = shadowed || strings.Contains(w.Message, filepath.Join(tr.search, "bad.yaml")+" is not used")
	}
	if !shadowed {
		t.Errorf("no warning that the later tpl-bad is not used: %v", set.Warnings())
	}
	_, err = set.Chain("tpl-child")
	if coded.CodeOf(err) != CodeMissingParent || !strings.Contains(err.Error(), malformed) {
		t.Errorf("a child of a broken parent: %v", err)
	}
	_, err = set.Get("tpl-nowhere")
	if coded.CodeOf(err) != CodeNotFound || !strings.Contains(err.Error(), "1 definition file(s) could not be read") {
		t.Errorf("an unknown name beside a nameless broken file: %v", err)
	}
}

// A broken file defining a name that a trusted source before it defines
// does not take that name away: it would have been shadowed anyway.
func TestKeepGoingBrokenFileAfterATrustedOne(t *testing.T) {
	tr := newTree(t)
	tr.user(t, "dev.yaml", "name: tpl-dev\nimage: [\n")
	opts := tr.options()
	opts.KeepGoing = true
	set, err := Load(opts)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := set.Get("tpl-dev"); err != nil || d.Source.Kind != SourceBuiltin {
		t.Errorf("tpl-dev: %+v, %v", d, err)
	}
	if len(set.Broken()) != 1 {
		t.Errorf("broken %+v", set.Broken())
	}
}

// Two files of one directory defining one name make it unusable under
// KeepGoing, naming both.
func TestKeepGoingDuplicateName(t *testing.T) {
	tr := newTree(t)
	first := tr.user(t, "a.yaml", "name: tpl-twice\nimage: isx/busybox\n")
	second := tr.user(t, "b.yaml", "name: tpl-twice\nimage: isx/debian-12\n")
	opts := tr.options()
	opts.KeepGoing = true
	set, err := Load(opts)
	if err != nil {
		t.Fatal(err)
	}
	_, err = set.Get("tpl-twice")
	if coded.CodeOf(err) != CodeDuplicate || !strings.Contains(err.Error(), first) || !strings.Contains(err.Error(), second) {
		t.Errorf("Get: %v", err)
	}
}
