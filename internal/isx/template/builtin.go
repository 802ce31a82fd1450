package template

import (
	"embed"
	"io/fs"
	"path"
	"sort"
)

// builtinFS holds the definitions shipped inside the isx binary. They are
// trusted and must build offline (no packages, no network in steps).
//
//go:embed builtin/*.yaml
var builtinFS embed.FS

// builtins parses every embedded definition, in file name order.
func builtins() ([]*Definition, error) {
	names, err := fs.Glob(builtinFS, "builtin/*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []*Definition
	for _, name := range names {
		data, err := builtinFS.ReadFile(name)
		if err != nil {
			return nil, unreadable(builtinPath(name), "cannot be read", err)
		}
		d, err := parse(data, builtinPath(path.Base(name)), "")
		if err != nil {
			return nil, err
		}
		d.Source = Source{Kind: SourceBuiltin, Path: builtinPath(name), Trusted: true}
		out = append(out, d)
	}
	return out, nil
}
