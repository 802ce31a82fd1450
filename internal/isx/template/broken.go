package template

import (
	"fmt"
	"regexp"

	"go.yaml.in/yaml/v3"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/yamltree"
)

// Broken is a definition file, or a directory of them, that Load could not
// use under Options.KeepGoing.
type Broken struct {
	File string
	Kind SourceKind
	// Name is the template the file seems to define, read as far as the
	// file allows; "" when that cannot be told.
	Name string
	// Err says what is wrong, naming the file (and line, when known).
	Err error
}

// declaredNamePattern finds a top-level name in a file that is not valid YAML.
var declaredNamePattern = regexp.MustCompile(`(?m)^name:[ \t]*["']?([A-Za-z0-9][A-Za-z0-9._-]*)`)

// declaredName is the name a definition that failed to parse seems to
// give itself, so that its name is not silently taken by another source.
func declaredName(data []byte) string {
	var top struct {
		Name string `yaml:"name"`
	}
	if yaml.Unmarshal(data, &top) == nil && top.Name != "" {
		return top.Name
	}
	if m := declaredNamePattern.FindSubmatch(data); m != nil {
		return string(m[1])
	}
	return ""
}

// brokenError is what Get and Chain say of a name a broken file defines.
func brokenError(name string, b *Broken) error {
	code := coded.CodeOf(b.Err)
	if code == "" {
		code = CodeInvalid
	}
	return &Error{yamltree.Problem(code, yamltree.Place{}, b.Err, "template %s cannot be used until its definition is fixed: %v", name, b.Err)}
}

// Broken lists the files Load could not use, in source order.
func (s *Set) Broken() []Broken {
	out := make([]Broken, 0, len(s.broken))
	for _, b := range s.broken {
		out = append(out, *b)
	}
	return out
}

// unusable says why a name has no usable definition: it was claimed by a
// broken file, or it is not defined at all (and a broken file whose name
// could not be told may be the one).
func (s *Set) unusable(name string) error {
	if b, ok := s.brokenNames[name]; ok {
		return brokenError(name, b)
	}
	unnamed := 0
	for _, b := range s.broken {
		if b.Name == "" {
			unnamed++
		}
	}
	msg := fmt.Sprintf("no template named %q is defined; `isx list` shows the templates there are", name)
	if unnamed > 0 {
		msg += fmt.Sprintf(" (%d definition file(s) could not be read, and may define it)", unnamed)
	}
	return &Error{yamltree.Problem(CodeNotFound, yamltree.Place{}, nil, "%s", msg)}
}
