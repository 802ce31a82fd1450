package template

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/incusspawn/isx/internal/isx/yamltree"
	"github.com/incusspawn/isx/internal/spelling"
)

// Set is every definition that won its name, with what it shadowed. It is
// not changed after it is made, so it may be shared between goroutines.
type Set struct {
	byName   map[string]*Definition
	shadowed []*Definition
	warnings []Warning
	// broken are the files Load could not use (Options.KeepGoing);
	// brokenNames the names they claimed, which no later source may take.
	broken      []*Broken
	brokenNames map[string]*Broken
}

// NewSet merges definitions given in source order (built-in, user, search
// paths, project-local). For each name: the first trusted definition wins
// and later trusted ones are shadowed with a warning; a trusted definition
// shadows a project-local one wherever it comes; two untrusted definitions
// of one name are an error, since neither may be preferred.
func NewSet(defs ...*Definition) (*Set, error) {
	entries := make([]entry, len(defs))
	for i, d := range defs {
		entries[i] = entry{def: d}
	}
	return newSet(false, entries)
}

// newSet is NewSet over entries that may be broken files. A broken file
// claims its name as a definition would; under keepGoing, two untrusted
// definitions of one name make it unusable instead of failing.
func newSet(keepGoing bool, entries []entry) (*Set, error) {
	s := &Set{byName: map[string]*Definition{}, brokenNames: map[string]*Broken{}}
	for _, e := range entries {
		if e.broken != nil {
			s.claimBroken(e.broken)
			continue
		}
		d := e.def
		existing, ok := s.byName[d.Name]
		if b, claimed := s.brokenNames[d.Name]; claimed {
			s.warnings = append(s.warnings, Warning{Code: WarningShadowed, Name: d.Name, File: d.Source.Path,
				Message: fmt.Sprintf("template %s in %s is not used: %s, which comes first, defines it and cannot be read; fix that file", d.Name, d.Source.Path, b.File)})
			continue
		}
		switch {
		case !ok:
			s.byName[d.Name] = d
		case existing.trusted():
			s.shadow(d, existing)
		case d.trusted():
			s.byName[d.Name] = d
			s.shadow(existing, d)
		default:
			err := &Error{yamltree.Problem(CodeDuplicate, yamltree.Place{File: d.Source.Path, Key: "name"}, nil, "%q is also defined by %s; rename or remove one", d.Name, existing.Source.Path)}
			if !keepGoing {
				return nil, err
			}
			delete(s.byName, d.Name)
			s.claimBroken(&Broken{File: d.Source.Path, Kind: d.Source.Kind, Name: d.Name, Err: err})
		}
	}
	return s, nil
}

// claimBroken records a broken file, and its name when no trusted
// definition came before it (a broken file of a later source would have
// been shadowed anyway).
func (s *Set) claimBroken(b *Broken) {
	s.broken = append(s.broken, b)
	if b.Name == "" {
		return
	}
	if existing, ok := s.byName[b.Name]; ok && existing.trusted() {
		return
	}
	if _, ok := s.brokenNames[b.Name]; !ok {
		delete(s.byName, b.Name)
		s.brokenNames[b.Name] = b
	}
}

func (s *Set) shadow(loser, winner *Definition) {
	s.shadowed = append(s.shadowed, loser)
	msg := fmt.Sprintf("template %s in %s (%s) is shadowed by %s (%s), which comes first; isx uses that one, so rename one of them",
		loser.Name, loser.Source.Path, loser.Source.Kind, winner.Source.Path, winner.Source.Kind)
	if loser.ProjectLocal() {
		msg = fmt.Sprintf("project-local template %s in %s is shadowed by the trusted %s (%s); isx uses the trusted one, so rename the project-local one to use it",
			loser.Name, loser.Source.Path, winner.Source.Path, winner.Source.Kind)
	}
	s.warnings = append(s.warnings, Warning{Code: WarningShadowed, Name: loser.Name, File: loser.Source.Path, Message: msg})
}

// trusted is decided by the source's kind as well as its flag, so that a
// project-local definition is never trusted however it was built.
func (d *Definition) trusted() bool {
	return d.Source.Trusted && d.Source.Kind != SourceProjectLocal
}

// Warnings are the shadowings and missing search paths Load noticed.
func (s *Set) Warnings() []Warning { return append([]Warning(nil), s.warnings...) }

// Shadowed are the definitions that lost their name to another.
func (s *Set) Shadowed() []*Definition { return append([]*Definition(nil), s.shadowed...) }

// Names lists the templates in the set, sorted.
func (s *Set) Names() []string { return slices.Sorted(maps.Keys(s.byName)) }

// Definitions lists the winning definitions, sorted by name.
func (s *Set) Definitions() []*Definition {
	out := make([]*Definition, 0, len(s.byName))
	for _, name := range s.Names() {
		out = append(out, s.byName[name])
	}
	return out
}

// Get returns the definition of name.
func (s *Set) Get(name string) (*Definition, error) {
	d, ok := s.byName[name]
	if !ok {
		return nil, s.unusable(name)
	}
	return d, nil
}

// Chain returns name's definition and its ancestors, parents first: the
// first element names the root image. A parent that is not defined, a
// cycle, or a root without an image is an error.
func (s *Set) Chain(name string) ([]*Definition, error) {
	d, err := s.Get(name)
	if err != nil {
		return nil, err
	}
	var chain []*Definition
	position := map[string]int{}
	for cur := d; ; {
		if at, seen := position[cur.Name]; seen {
			return nil, s.cycle(chain[at:], cur)
		}
		position[cur.Name] = len(chain)
		chain = append(chain, cur)
		if cur.Parent == "" {
			break
		}
		parent, ok := s.byName[cur.Parent]
		if b, broken := s.brokenNames[cur.Parent]; !ok && broken {
			return nil, &Error{yamltree.Problem(CodeMissingParent, yamltree.Place{File: cur.Source.Path, Line: cur.parentLine, Key: "parent"}, b.Err,
				"names parent template %q, whose definition cannot be used: %v", cur.Parent, b.Err)}
		}
		if !ok {
			msg := fmt.Sprintf("names parent template %q, which no source defines; ", cur.Parent)
			if near := spelling.Nearest(cur.Parent, s.Names()); near != "" {
				msg += "did you mean " + near + "?"
			} else {
				msg += "define it or fix the name"
			}
			if cur != d {
				msg += fmt.Sprintf(" (%s builds on %s)", d.Name, cur.Name)
			}
			return nil, &Error{yamltree.Problem(CodeMissingParent, yamltree.Place{File: cur.Source.Path, Line: cur.parentLine, Key: "parent"}, nil, "%s", msg)}
		}
		cur = parent
	}
	root := chain[len(chain)-1]
	if root.Image == "" {
		return nil, &Error{yamltree.Problem(CodeNoRootImage, yamltree.Place{File: root.Source.Path, Key: "image"}, nil, "template %s has neither a parent nor an image, so %s has nothing to build on; give it an `image`", root.Name, d.Name)}
	}
	for i, j := 0, len(chain)-1; i < j; i, j = i+1, j-1 {
		chain[i], chain[j] = chain[j], chain[i]
	}
	return chain, nil
}

func (s *Set) cycle(loop []*Definition, back *Definition) error {
	names := make([]string, 0, len(loop)+1)
	for _, d := range loop {
		names = append(names, d.Name)
	}
	names = append(names, back.Name)
	last := loop[len(loop)-1]
	return &Error{yamltree.Problem(CodeCycle, yamltree.Place{File: last.Source.Path, Line: last.parentLine, Key: "parent"}, nil, "parents form a cycle: %s; give one of these templates an `image` instead of a parent", strings.Join(names, " → "))}
}

// ChainHash is the hex sha256 over the hashes of name's whole chain, so a
// changed parent makes every template built on it stale.
func (s *Set) ChainHash(name string) (string, error) {
	chain, err := s.Chain(name)
	if err != nil {
		return "", err
	}
	return chainHash(chain), nil
}

// EffectiveSource is the source an instance built from name is stamped
// with: project-local when any definition in its chain is, so that an
// image built from a project-local definition is never mistaken for a
// trusted one; otherwise the template's own source.
func (s *Set) EffectiveSource(name string) (SourceKind, error) {
	chain, err := s.Chain(name)
	if err != nil {
		return "", err
	}
	for _, d := range chain {
		if !d.trusted() {
			return SourceProjectLocal, nil
		}
	}
	return chain[len(chain)-1].Source.Kind, nil
}

// Approvable reports whether name may be used through MCP at all (whether
// mcp.yaml approves it is the caller's question). Project-local
// definitions never may, nor a template built on one.
func (s *Set) Approvable(name string) error {
	d, err := s.Get(name)
	if err != nil {
		return err
	}
	if d.ProjectLocal() {
		return &Error{yamltree.Problem(CodeNotApproved, yamltree.Place{File: d.Source.Path, Key: "name"}, nil, "template %s is a project-local definition (.incus-spawn/); project-local definitions can never be used through MCP", name)}
	}
	if !d.trusted() {
		return &Error{yamltree.Problem(CodeNotApproved, yamltree.Place{File: d.Source.Path, Key: "name"}, nil, "template %s does not come from a trusted source (built-in, ~/.config/incus-spawn/images/ or template-paths), so it can never be used through MCP", name)}
	}
	chain, err := s.Chain(name)
	if err != nil {
		return err
	}
	for _, c := range chain {
		if !c.trusted() {
			return &Error{yamltree.Problem(CodeNotApproved, yamltree.Place{File: c.Source.Path, Key: "parent"}, nil, "template %s builds on %s, a project-local definition (.incus-spawn/); project-local definitions can never be used through MCP, not even as a parent", name, c.Name)}
		}
	}
	return nil
}
