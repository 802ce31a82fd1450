package template

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/incusspawn/isx/internal/isx/yamltree"
)

// errNotDir is what stat says when a parent of .incus-spawn is a file.
var errNotDir error = syscall.ENOTDIR

// ProjectDirName is the directory, found from the working directory
// upwards, that holds a project's own (never trusted) definitions.
const ProjectDirName = ".incus-spawn"

// UserDir is the user's own definitions directory.
func UserDir(home string) string {
	return filepath.Join(home, ".config", "incus-spawn", "images")
}

// Options say where Load looks for definitions.
type Options struct {
	// Home is the user's home directory (absolute); it is never read from
	// the environment here.
	Home string
	// SearchPaths are config.yaml's template-paths: absolute directories
	// searched after the user directory, in order.
	SearchPaths []string
	// WorkDir is where the search for a project's .incus-spawn/ starts
	// (absolute); empty means no project-local definitions.
	WorkDir string
}

// Warning is something Load noticed that does not stop it: a definition
// shadowed by another of the same name, a configured search path that
// does not exist.
type Warning struct {
	Code    string // WarningShadowed or WarningMissingSearchPath
	Name    string // template name, when the warning is about one
	File    string
	Message string
}

func (w Warning) String() string { return w.Message }

// Warning codes.
const (
	WarningShadowed          = "shadowed"
	WarningMissingSearchPath = "missing_search_path"
)

// Load reads every definition from the built-in set, the user directory,
// the search paths and the project's .incus-spawn/ (and, as older releases
// laid them out, the images/ directory inside a search path or
// .incus-spawn/), and merges them into a Set. A file that cannot be read
// or parsed fails the whole load, naming the file: nothing is skipped
// silently. Files whose names start with "." are editor leftovers and are
// not read; only *.yaml and *.yml files are.
func Load(opts Options) (*Set, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	defs, err := builtins()
	if err != nil {
		return nil, err
	}
	userDir := UserDir(opts.Home)
	user, err := loadSource(SourceUser, userDir)
	if err != nil {
		return nil, err
	}
	defs = append(defs, user...)
	searched, warnings, err := loadSearchPaths(opts.SearchPaths, userDir)
	if err != nil {
		return nil, err
	}
	defs = append(defs, searched...)
	if opts.WorkDir != "" {
		local, err := loadProject(opts.WorkDir)
		if err != nil {
			return nil, err
		}
		defs = append(defs, local...)
	}
	set, err := NewSet(defs...)
	if err != nil {
		return nil, err
	}
	set.warnings = append(warnings, set.warnings...)
	return set, nil
}

// loadSearchPaths reads each search path once (skipping the user
// directory, already read), in order. A path that does not exist is a
// warning: the configuration names it, but a missing directory holds no
// definitions to get wrong.
func loadSearchPaths(paths []string, userDir string) ([]*Definition, []Warning, error) {
	var (
		defs     []*Definition
		warnings []Warning
		loaded   = map[string]bool{userDir: true}
	)
	for _, dir := range paths {
		dir = filepath.Clean(dir)
		if loaded[dir] {
			continue
		}
		loaded[dir] = true
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			warnings = append(warnings, Warning{Code: WarningMissingSearchPath, File: dir,
				Message: fmt.Sprintf("template path %s (config.yaml template-paths) does not exist; create it or remove it from the list", dir)})
			continue
		}
		found, err := loadSource(SourceSearchPath, dir, filepath.Join(dir, "images"))
		if err != nil {
			return nil, nil, err
		}
		defs = append(defs, found...)
	}
	return defs, warnings, nil
}

func loadProject(workDir string) ([]*Definition, error) {
	project, ok, err := FindProjectDir(workDir)
	if err != nil || !ok {
		return nil, err
	}
	return loadSource(SourceProjectLocal, project, filepath.Join(project, "images"))
}

func (o Options) check() error {
	bad := func(field, msg string) error {
		return &Error{yamltree.Problem(CodeBadOptions, yamltree.Place{Key: field}, nil, "%s", msg)}
	}
	if o.Home == "" || !filepath.IsAbs(o.Home) {
		return bad("Home", fmt.Sprintf("home directory %q must be an absolute path", o.Home))
	}
	if o.WorkDir != "" && !filepath.IsAbs(o.WorkDir) {
		return bad("WorkDir", fmt.Sprintf("working directory %q must be an absolute path", o.WorkDir))
	}
	for _, p := range o.SearchPaths {
		if !filepath.IsAbs(p) {
			return bad("SearchPaths", fmt.Sprintf("template path %q must be an absolute path", p))
		}
	}
	return nil
}

// FindProjectDir looks for a .incus-spawn directory in workDir and each of
// its parents, and returns the nearest.
func FindProjectDir(workDir string) (string, bool, error) {
	dir := filepath.Clean(workDir)
	for {
		candidate := filepath.Join(dir, ProjectDirName)
		info, err := os.Stat(candidate)
		switch {
		case err == nil && info.IsDir():
			return candidate, true, nil
		case err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, errNotDir):
			return "", false, unreadable(candidate, "cannot be examined", err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false, nil
		}
		dir = parent
	}
}

// loadSource reads the definitions of one source, spread over dirs. Two
// files of one source defining the same name is an error: nothing says
// which one was meant.
func loadSource(kind SourceKind, dirs ...string) ([]*Definition, error) {
	var out []*Definition
	byName := map[string]*Definition{}
	for _, dir := range dirs {
		found, err := loadDir(dir, kind)
		if err != nil {
			return nil, err
		}
		for _, d := range found {
			if first, dup := byName[d.Name]; dup {
				return nil, &Error{yamltree.Problem(CodeDuplicate, yamltree.Place{File: d.Source.Path, Key: "name"}, nil, "%q is also defined by %s; each template name may be defined once per directory, so rename or remove one", d.Name, first.Source.Path)}
			}
			byName[d.Name] = d
			out = append(out, d)
		}
	}
	return out, nil
}

func loadDir(dir string, kind SourceKind) ([]*Definition, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, unreadable(dir, "template directory cannot be read", err)
	}
	var out []*Definition
	for _, entry := range entries {
		name := entry.Name()
		if strings.HasPrefix(name, ".") || !(strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) {
			continue
		}
		file := filepath.Join(dir, name)
		info, err := os.Stat(file)
		if err != nil {
			return nil, unreadable(file, "cannot be read", err)
		}
		if info.IsDir() {
			continue
		}
		data, err := readLimited(file)
		if err != nil {
			return nil, err
		}
		d, err := parse(data, file, dir)
		if err != nil {
			return nil, err
		}
		d.Source = Source{Kind: kind, Path: file, Trusted: kind != SourceProjectLocal}
		out = append(out, d)
	}
	return out, nil
}
