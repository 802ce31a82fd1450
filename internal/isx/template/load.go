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
	// KeepGoing makes a definition file (or directory) that cannot be
	// read or used a Broken entry of the Set instead of failing the whole
	// load, so that one bad file does not stop work with the others. The
	// name such a file defines, when it can be told, stays unusable: Get
	// returns the file's error rather than a definition of that name from
	// a later source.
	KeepGoing bool
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
// or parsed fails the whole load, naming the file, unless KeepGoing makes
// it a Broken entry: nothing is skipped silently. Files whose names start
// with "." are editor leftovers and are not read; only *.yaml and *.yml
// files are.
func Load(opts Options) (*Set, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	defs, err := builtins()
	if err != nil {
		return nil, err
	}
	l := &loader{keepGoing: opts.KeepGoing}
	for _, d := range defs {
		l.entries = append(l.entries, entry{def: d})
	}
	userDir := UserDir(opts.Home)
	if err := l.source(SourceUser, userDir); err != nil {
		return nil, err
	}
	warnings, err := l.searchPaths(opts.SearchPaths, userDir)
	if err != nil {
		return nil, err
	}
	if opts.WorkDir != "" {
		if err := l.project(opts.WorkDir); err != nil {
			return nil, err
		}
	}
	set, err := newSet(l.keepGoing, l.entries)
	if err != nil {
		return nil, err
	}
	set.warnings = append(warnings, set.warnings...)
	return set, nil
}

// loader gathers definitions in source order; under keepGoing a failure
// of one file or directory is kept as a broken entry and loading goes on.
type loader struct {
	keepGoing bool
	entries   []entry
}

// entry is a definition, or a file that could not give one.
type entry struct {
	def    *Definition
	broken *Broken
}

func (e entry) file() string {
	if e.broken != nil {
		return e.broken.File
	}
	return e.def.Source.Path
}

func (e entry) name() string {
	if e.broken != nil {
		return e.broken.Name
	}
	return e.def.Name
}

// fail keeps err as a broken entry under keepGoing, else returns it.
func (l *loader) fail(kind SourceKind, file, name string, err error) error {
	if !l.keepGoing {
		return err
	}
	l.entries = append(l.entries, entry{broken: &Broken{File: file, Kind: kind, Name: name, Err: err}})
	return nil
}

// searchPaths reads each search path once (skipping the user directory,
// already read), in order. A path that does not exist is a warning: the
// configuration names it, but a missing directory holds no definitions to
// get wrong.
func (l *loader) searchPaths(paths []string, userDir string) ([]Warning, error) {
	var (
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
		if err := l.source(SourceSearchPath, dir, filepath.Join(dir, "images")); err != nil {
			return nil, err
		}
	}
	return warnings, nil
}

func (l *loader) project(workDir string) error {
	project, ok, err := FindProjectDir(workDir)
	if err != nil {
		return l.fail(SourceProjectLocal, filepath.Join(workDir, ProjectDirName), "", err)
	}
	if !ok {
		return nil
	}
	return l.source(SourceProjectLocal, project, filepath.Join(project, "images"))
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

// source reads the definitions of one source, spread over dirs. Two
// files of one source defining the same name is an error: nothing says
// which one was meant.
func (l *loader) source(kind SourceKind, dirs ...string) error {
	first := len(l.entries)
	byName := map[string]int{} // index into l.entries
	for _, dir := range dirs {
		if err := l.dir(dir, kind); err != nil {
			return err
		}
	}
	for i := first; i < len(l.entries); i++ {
		e := l.entries[i]
		if e.def == nil {
			continue
		}
		at, dup := byName[e.def.Name]
		if !dup {
			byName[e.def.Name] = i
			continue
		}
		path := l.entries[at].file()
		err := &Error{yamltree.Problem(CodeDuplicate, yamltree.Place{File: e.def.Source.Path, Key: "name"}, nil, "%q is also defined by %s; each template name may be defined once per directory, so rename or remove one", e.def.Name, path)}
		if !l.keepGoing {
			return err
		}
		// Neither file may be preferred: the name is unusable.
		l.entries[at] = entry{broken: &Broken{File: e.def.Source.Path, Kind: kind, Name: e.def.Name, Err: err}}
		l.entries[i] = entry{broken: &Broken{File: e.def.Source.Path, Kind: kind, Err: err}}
	}
	return nil
}

func (l *loader) dir(dir string, kind SourceKind) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return l.fail(kind, dir, "", unreadable(dir, "template directory cannot be read", err))
	}
	for _, entry := range entries {
		name := entry.Name()
		if strings.HasPrefix(name, ".") || !(strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) {
			continue
		}
		file := filepath.Join(dir, name)
		info, err := os.Stat(file)
		if err != nil {
			if err := l.fail(kind, file, "", unreadable(file, "cannot be read", err)); err != nil {
				return err
			}
			continue
		}
		if info.IsDir() {
			continue
		}
		if err := l.file(file, dir, kind); err != nil {
			return err
		}
	}
	return nil
}

func (l *loader) file(file, dir string, kind SourceKind) error {
	data, err := readLimited(file)
	if err != nil {
		return l.fail(kind, file, "", err)
	}
	d, err := parse(data, file, dir)
	if err != nil {
		return l.fail(kind, file, declaredName(data), err)
	}
	d.Source = Source{Kind: kind, Path: file, Trusted: kind != SourceProjectLocal}
	l.entries = append(l.entries, entry{def: d})
	return nil
}
