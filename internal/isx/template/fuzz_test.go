package template

import (
	"errors"
	"regexp"
	"testing"
)

// FuzzParseTemplate: Parse never panics, every failure is a *Error with a
// code that names the file, and every success is a valid definition with
// a stable hash.
func FuzzParseTemplate(f *testing.F) {
	f.Add([]byte(fullDefinition))
	f.Add([]byte("name: tpl-dev\nimage: isx/debian-12\n"))
	f.Add([]byte("name: t\nparent: p\nrun: [ls, {run: pwd, user: agent}]\n"))
	f.Add([]byte("name: &a t\nimage: *a\n"))
	f.Add([]byte("- [a, {b: c}]\n"))
	f.Add([]byte("name: t\nimage: x\n---\nname: u\n"))
	f.Add([]byte(""))
	const path = "/fuzz/definition.yaml"
	hex64 := regexp.MustCompile(`^[0-9a-f]{64}$`)
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Parse(data, path)
		if err != nil {
			var te *Error
			if !errors.As(err, &te) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			if te.Code == "" || te.File != path || te.Message == "" {
				t.Fatalf("incomplete error %+v", te)
			}
			return
		}
		if CheckName(d.Name) != nil || (d.Parent == "") == (d.Image == "") {
			t.Fatalf("invalid definition accepted: %+v", d)
		}
		for _, s := range d.Run {
			if s.User != UserRoot && s.User != UserAgent {
				t.Fatalf("step user %q", s.User)
			}
		}
		h := d.Hash()
		if !hex64.MatchString(h) || h != d.Hash() {
			t.Fatalf("hash %q", h)
		}
		if _, err := NewSet(d); err != nil {
			t.Fatalf("NewSet: %v", err)
		}
	})
}
