package template

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/incusspawn/isx/internal/isx/yamltree"
)

// MaxFileSize bounds a definition file; anything larger is refused rather
// than read into memory.
const MaxFileSize = 4 << 20

// MaxNameLength bounds a template name, leaving room for the
// `<name>--build-<suffix>` and `mcp-<name>-<hint>-<suffix>` instance names
// within Incus's 63 characters.
const MaxNameLength = 40

var (
	namePattern    = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
	aliasPattern   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]*$`)
	packagePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)
	envPattern     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	accountPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,39}$`)
	modelPattern   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@\[\]-]*$`)
	modePattern    = regexp.MustCompile(`^(?:0[oO])?([0-7]{3,4})$`)
	scpPattern     = regexp.MustCompile(`^(?:[A-Za-z0-9._-]+@)?[A-Za-z0-9][A-Za-z0-9.-]*:[^:].*$`)
	allDigits      = regexp.MustCompile(`^[0-9]+$`)
)

var (
	topKeys  = []string{"name", "description", "parent", "image", "packages", "run", "files", "env", "tools", "accounts"}
	stepKeys = []string{"name", "run", "user"}
	fileKeys = []string{"path", "content", "mode", "owner"}
	toolKeys = []string{"name", "model", "repos", "workdir", "agent_note"}
	repoKeys = []string{"url", "path"}
	// meantKeys are the keys a definition's author writes, from other
	// tools' files or from memory, for the ones isx reads; each is
	// suggested only where it is allowed.
	meantKeys = map[string][]string{
		"steps": {"run"}, "commands": {"run"}, "command": {"run"}, "cmd": {"run"}, "script": {"run"},
		"scripts": {"run"}, "build": {"run"}, "shell": {"run"}, "exec": {"run"},
		"from": {"parent", "image"}, "base": {"parent", "image"}, "extends": {"parent"}, "inherits": {"parent"},
		"apt": {"packages"}, "pkgs": {"packages"}, "deps": {"packages"}, "dependencies": {"packages"}, "install": {"packages"},
		"environment": {"env"}, "vars": {"env"}, "variables": {"env"},
		"agents": {"tools"}, "desc": {"description"}, "summary": {"description"},
		"as": {"user"}, "runas": {"user"}, "run_as": {"user"}, "run-as": {"user"}, "label": {"name"}, "title": {"name"},
		"data": {"content"}, "text": {"content"}, "body": {"content"},
		"dest": {"path"}, "destination": {"path"}, "target": {"path"}, "file": {"path"},
		"permissions": {"mode"}, "perm": {"mode"}, "perms": {"mode"}, "chmod": {"mode"}, "chown": {"owner"},
		"dir": {"workdir"}, "cwd": {"workdir"}, "working_dir": {"workdir"}, "working-dir": {"workdir"},
		"repositories": {"repos"}, "note": {"agent_note"}, "notes": {"agent_note"}, "repo": {"url", "repos"},
	}
	toolList = []string{ToolClaude, ToolCodex, ToolPi, ToolOpencode}
	userList = []string{UserRoot, UserAgent}
	tarballs = []string{".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.zst", ".tar.bz2"}
)

// CheckName reports whether name can name a template: lowercase letters,
// digits and single hyphens, at most MaxNameLength characters, usable as
// an Incus instance name (so not all digits, no trailing hyphen, and no
// "--", which separates a build instance's suffix).
func CheckName(name string) error {
	const rule = "use lowercase letters, digits and single hyphens, starting with a letter or digit"
	switch {
	case name == "":
		return errors.New("is empty; " + rule)
	case len(name) > MaxNameLength:
		return fmt.Errorf("%q is %d characters long; a template name has at most %d", name, len(name), MaxNameLength)
	case !namePattern.MatchString(name):
		return fmt.Errorf("%q is not a template name; %s", name, rule)
	case strings.HasSuffix(name, "-"):
		return fmt.Errorf("%q ends with a hyphen, which Incus does not accept in an instance name", name)
	case strings.Contains(name, "--"):
		return fmt.Errorf("%q contains \"--\", which isx keeps for build instances (<name>--build-<suffix>)", name)
	case allDigits.MatchString(name):
		return fmt.Errorf("%q is all digits, which Incus does not accept as an instance name", name)
	}
	return nil
}

// Parse reads one definition. path names the file in errors, and relative
// image paths resolve against its directory. The result's Source has only
// Path set: Parse alone never makes a definition trusted.
func Parse(data []byte, path string) (*Definition, error) {
	dir := ""
	if path != "" {
		dir = filepath.Dir(path)
	}
	return parse(data, path, dir)
}

// ParseFile reads and parses the definition at path.
func ParseFile(path string) (*Definition, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, unreadable(path, "cannot resolve the path", err)
	}
	data, err := readLimited(abs)
	if err != nil {
		return nil, err
	}
	return Parse(data, abs)
}

func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, unreadable(path, "cannot be read", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, unreadable(path, "cannot be read", err)
	}
	if len(data) > MaxFileSize {
		return nil, &Error{yamltree.Problem(CodeInvalid, yamltree.Place{File: path}, nil, "is larger than %d bytes; a template definition should be far smaller", MaxFileSize)}
	}
	return data, nil
}

// parse reads one definition; baseDir anchors relative image paths ("" for
// built-ins, which may only name aliases or absolute paths).
func parse(data []byte, file, baseDir string) (*Definition, error) {
	r := &definitionReader{baseDir: baseDir, Reader: yamltree.Reader{
		File:           file,
		SecondDocument: "put each template in a file of its own",
		NewError:       fromTree,
		Meant:          meantKeys,
	}}
	_, root, err := r.Document(data)
	if err != nil {
		return nil, err
	}
	if root == nil {
		return nil, invalidf(file, 0, "", "is empty; a template needs at least `name` and either `image` or `parent`")
	}
	d, err := r.definition(root)
	if err != nil {
		return nil, err
	}
	d.Source = Source{Path: file}
	return d, nil
}

type definitionReader struct {
	yamltree.Reader
	baseDir string
}

func (r *definitionReader) definition(root *yaml.Node) (*Definition, error) {
	d := &Definition{}
	var nameNode, parentNode, imageNode *yaml.Node
	err := r.Mapping(root, "", topKeys, func(key string, k, v *yaml.Node) error {
		var err error
		switch key {
		case "name":
			nameNode = k
			d.Name, err = r.name(v, "name")
		case "description":
			d.Description, err = r.Text(v, "description")
		case "parent":
			parentNode = k
			d.Parent, err = r.name(v, "parent")
			d.parentLine = k.Line
		case "image":
			imageNode = k
			d.Image, d.ImageFile, err = r.image(v)
		case "packages":
			d.Packages, err = r.packages(v)
		case "run":
			d.Run, err = r.steps(v)
		case "files":
			d.Files, err = r.files(v)
		case "env":
			d.Env, err = r.env(v)
		case "tools":
			d.Tools, err = r.tools(v)
		case "accounts":
			d.Accounts, err = r.accounts(v)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if nameNode == nil || d.Name == "" {
		return nil, invalidf(r.File, root.Line, "name", "is missing; every template needs a name like tpl-dev")
	}
	switch {
	case d.Parent != "" && d.Image != "":
		return nil, invalidf(r.File, imageNode.Line, "image", "is given together with `parent` (line %d); a template builds either on a parent template or on an image, so remove one", parentNode.Line)
	case d.Parent == "" && d.Image == "":
		return nil, invalidf(r.File, root.Line, "image", "is missing; give either `image` (an Incus image alias like isx/debian-12, or a local image tarball) or `parent` (another template's name)")
	case d.Parent == d.Name:
		return nil, &Error{yamltree.Problem(CodeCycle, yamltree.Place{File: r.File, Line: parentNode.Line, Key: "parent"}, nil, "is %q, the template itself; name a different template or use `image`", d.Parent)}
	}
	return d, nil
}

func (r *definitionReader) name(v *yaml.Node, field string) (string, error) {
	s, err := r.Text(v, field)
	if err != nil {
		return "", err
	}
	if s == "" {
		return "", nil // reported as missing by the caller
	}
	if err := CheckName(s); err != nil {
		return "", invalidf(r.File, v.Line, field, "%s", err.Error())
	}
	return s, nil
}

// image returns the image as written and, for a local tarball, its
// absolute path.
func (r *definitionReader) image(v *yaml.Node) (string, string, error) {
	s, err := r.Text(v, "image")
	if err != nil || s == "" {
		return "", "", err
	}
	if strings.HasPrefix(s, "~") {
		return "", "", invalidf(r.File, v.Line, "image", "%q starts with ~, which isx does not expand; give an absolute path or one relative to this file's directory", s)
	}
	if !isImagePath(s) {
		if strings.Contains(s, ":") {
			return "", "", invalidf(r.File, v.Line, "image", "%q names a remote image, which isx does not fetch; copy it into the local image store (incus image copy %s local: --alias <alias>) and name that alias", s, s)
		}
		if len(s) > 255 || !aliasPattern.MatchString(s) {
			return "", "", invalidf(r.File, v.Line, "image", "%q is neither an Incus image alias (letters, digits, '.', '_', '-' and '/') nor a path to an image tarball (starting with /, ./ or ../, or ending in .tar.gz and the like)", s)
		}
		return s, "", nil
	}
	if hasControl(s) {
		return "", "", invalidf(r.File, v.Line, "image", "path contains control characters")
	}
	file := s
	if !filepath.IsAbs(s) {
		if r.baseDir == "" {
			return "", "", invalidf(r.File, v.Line, "image", "%q is a relative path, which a built-in definition cannot use", s)
		}
		file = filepath.Join(r.baseDir, s)
	}
	return s, filepath.Clean(file), nil
}

func isImagePath(s string) bool {
	if strings.HasPrefix(s, "/") || strings.HasPrefix(s, "./") || strings.HasPrefix(s, "../") {
		return true
	}
	lower := strings.ToLower(s)
	for _, ext := range tarballs {
		if strings.HasSuffix(lower, ext) {
			return true
		}
	}
	return false
}

func (r *definitionReader) packages(v *yaml.Node) ([]string, error) {
	items, err := r.List(v, "packages")
	if err != nil {
		return nil, err
	}
	var out []string
	for i, item := range items {
		field := yamltree.Index("packages", i)
		s, err := r.Text(item, field)
		if err != nil {
			return nil, err
		}
		if !packagePattern.MatchString(s) {
			return nil, invalidf(r.File, item.Line, field, "%q is not a Debian package name (lowercase letters, digits, '+', '-' and '.', at least two characters)", s)
		}
		out = append(out, s)
	}
	return out, nil
}

func (r *definitionReader) steps(v *yaml.Node) ([]Step, error) {
	items, err := r.List(v, "run")
	if err != nil {
		return nil, err
	}
	var out []Step
	for i, item := range items {
		step, err := r.step(item, yamltree.Index("run", i))
		if err != nil {
			return nil, err
		}
		out = append(out, step)
	}
	return out, nil
}

// step accepts a plain string as a root step, or {name?, run, user?}.
func (r *definitionReader) step(n *yaml.Node, field string) (Step, error) {
	step := Step{User: UserRoot}
	if n.Kind == yaml.ScalarNode && !yamltree.IsNull(n) {
		step.Run = n.Value
		return step, r.checkScript(n, field, step.Run)
	}
	if n.Kind != yaml.MappingNode {
		return step, invalidf(r.File, n.Line, field, "must be a shell command or a mapping {name, run, user}, not %s", yamltree.Describe(n))
	}
	var runNode *yaml.Node
	err := r.Mapping(n, field, stepKeys, func(key string, k, v *yaml.Node) error {
		var err error
		switch key {
		case "name":
			step.Name, err = r.oneLine(v, yamltree.Join(field, "name"))
		case "run":
			runNode = v
			step.Run, err = r.Text(v, yamltree.Join(field, "run"))
		case "user":
			step.User, err = r.user(v, yamltree.Join(field, "user"))
		}
		return err
	})
	if err != nil {
		return step, err
	}
	if runNode == nil {
		return step, invalidf(r.File, n.Line, yamltree.Join(field, "run"), "is missing; a step needs the shell command to run")
	}
	return step, r.checkScript(runNode, yamltree.Join(field, "run"), step.Run)
}

func (r *definitionReader) checkScript(n *yaml.Node, field, script string) error {
	if strings.TrimSpace(script) == "" {
		return invalidf(r.File, n.Line, field, "is empty; give the shell command to run")
	}
	if strings.ContainsRune(script, 0) {
		return invalidf(r.File, n.Line, field, "contains a NUL character, which no shell accepts")
	}
	return nil
}

func (r *definitionReader) oneLine(v *yaml.Node, field string) (string, error) {
	s, err := r.Text(v, field)
	if err != nil {
		return "", err
	}
	if hasControl(s) {
		return "", invalidf(r.File, v.Line, field, "must be a single line of text")
	}
	return s, nil
}

func (r *definitionReader) user(v *yaml.Node, field string) (string, error) {
	s, err := r.Text(v, field)
	if err != nil {
		return "", err
	}
	if !slices.Contains(userList, s) {
		return "", invalidf(r.File, v.Line, field, "%q is not a user isx knows; use root or agent", s)
	}
	return s, nil
}

func (r *definitionReader) files(v *yaml.Node) ([]File, error) {
	items, err := r.List(v, "files")
	if err != nil {
		return nil, err
	}
	var out []File
	seen := map[string]int{}
	for i, item := range items {
		field := yamltree.Index("files", i)
		f, pathLine, err := r.file1(item, field)
		if err != nil {
			return nil, err
		}
		if first, dup := seen[f.Path]; dup {
			return nil, invalidf(r.File, pathLine, yamltree.Join(field, "path"), "%q is already written by the entry on line %d; keep one", f.Path, first)
		}
		seen[f.Path] = pathLine
		out = append(out, f)
	}
	return out, nil
}

func (r *definitionReader) file1(n *yaml.Node, field string) (File, int, error) {
	f := File{Owner: UserRoot}
	if n.Kind != yaml.MappingNode {
		return f, 0, invalidf(r.File, n.Line, field, "must be a mapping {path, content, mode, owner}, not %s", yamltree.Describe(n))
	}
	pathLine := 0
	err := r.Mapping(n, field, fileKeys, func(key string, k, v *yaml.Node) error {
		var err error
		switch key {
		case "path":
			pathLine = v.Line
			f.Path, err = r.absolutePath(v, yamltree.Join(field, "path"))
		case "content":
			f.Content, err = r.Text(v, yamltree.Join(field, "content"))
		case "mode":
			f.Mode, err = r.mode(v, yamltree.Join(field, "mode"))
			f.HasMode = err == nil
		case "owner":
			f.Owner, err = r.user(v, yamltree.Join(field, "owner"))
		}
		return err
	})
	if err != nil {
		return f, 0, err
	}
	if f.Path == "" {
		return f, 0, invalidf(r.File, n.Line, yamltree.Join(field, "path"), "is missing; say where in the instance the file goes, as an absolute path")
	}
	return f, pathLine, nil
}

func (r *definitionReader) absolutePath(v *yaml.Node, field string) (string, error) {
	s, err := r.Text(v, field)
	if err != nil {
		return "", err
	}
	switch {
	case s == "":
		return "", nil // reported as missing by the caller
	case hasControl(s):
		return "", invalidf(r.File, v.Line, field, "contains control characters")
	case !strings.HasPrefix(s, "/"):
		return "", invalidf(r.File, v.Line, field, "%q is not an absolute path; write it from / like /etc/motd", s)
	case s == "/" || strings.HasSuffix(s, "/"):
		return "", invalidf(r.File, v.Line, field, "%q names a directory; name the file", s)
	case filepath.Clean(s) != s:
		return "", invalidf(r.File, v.Line, field, "%q is not a clean path (no //, . or .. parts); write %q", s, filepath.Clean(s))
	}
	return s, nil
}

func (r *definitionReader) mode(v *yaml.Node, field string) (uint32, error) {
	s, err := r.Text(v, field)
	if err != nil {
		return 0, err
	}
	m := modePattern.FindStringSubmatch(s)
	if m == nil {
		return 0, invalidf(r.File, v.Line, field, "%q is not a file mode; write octal permission bits as a string like \"0644\"", s)
	}
	mode, _ := strconv.ParseUint(m[1], 8, 32)
	return uint32(mode), nil
}

func (r *definitionReader) env(v *yaml.Node) (map[string]string, error) {
	out := map[string]string{}
	err := r.Mapping(v, "env", nil, func(key string, k, val *yaml.Node) error {
		field := yamltree.Join("env", key)
		if !envPattern.MatchString(key) {
			return invalidf(r.File, k.Line, field, "%q is not an environment variable name (letters, digits and _, not starting with a digit)", key)
		}
		s, err := r.Text(val, field)
		if err != nil {
			return err
		}
		if strings.ContainsRune(s, 0) {
			return invalidf(r.File, val.Line, field, "contains a NUL character, which an environment value cannot hold")
		}
		out[key] = s
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// accounts reads {claude: work, github: bot}: per kind, the name of an
// account in accounts.yaml.
func (r *definitionReader) accounts(v *yaml.Node) (map[string]string, error) {
	out := map[string]string{}
	err := r.Mapping(v, "accounts", AccountKinds, func(kind string, _, val *yaml.Node) error {
		field := yamltree.Join("accounts", kind)
		name, err := r.Text(val, field)
		if err != nil {
			return err
		}
		if !accountPattern.MatchString(name) {
			return invalidf(r.File, val.Line, field, "%q is not an account name (lowercase letters, digits, '.', '_' and '-', at most 40) as accounts.yaml names them", name)
		}
		out[kind] = name
		return nil
	})
	if err != nil || len(out) == 0 {
		return nil, err
	}
	return out, nil
}

func (r *definitionReader) tools(v *yaml.Node) ([]Tool, error) {
	items, err := r.List(v, "tools")
	if err != nil {
		return nil, err
	}
	var out []Tool
	seen := map[string]int{}
	for i, item := range items {
		field := yamltree.Index("tools", i)
		t, err := r.tool(item, field)
		if err != nil {
			return nil, err
		}
		if first, dup := seen[t.Name]; dup {
			return nil, invalidf(r.File, item.Line, yamltree.Join(field, "name"), "%q is already configured by the entry on line %d; a template has at most one entry per tool", t.Name, first)
		}
		seen[t.Name] = item.Line
		out = append(out, t)
	}
	return out, nil
}

func (r *definitionReader) tool(n *yaml.Node, field string) (Tool, error) {
	var t Tool
	if n.Kind != yaml.MappingNode {
		return t, invalidf(r.File, n.Line, field, "must be a mapping like {name: claude, model: sonnet}, not %s", yamltree.Describe(n))
	}
	err := r.Mapping(n, field, toolKeys, func(key string, k, v *yaml.Node) error {
		var err error
		f := yamltree.Join(field, key)
		switch key {
		case "name":
			t.Name, err = r.Text(v, f)
			if err == nil && !slices.Contains(toolList, t.Name) {
				err = invalidf(r.File, v.Line, f, "%q is not a tool isx installs; use one of %s", t.Name, strings.Join(toolList, ", "))
			}
		case "model":
			t.Model, err = r.model(v, f)
		case "repos":
			t.Repos, err = r.repos(v, f)
		case "workdir":
			t.Workdir, err = r.agentPath(v, f)
		case "agent_note":
			t.AgentNote, err = r.Text(v, f)
		}
		return err
	})
	if err != nil {
		return t, err
	}
	if t.Name == "" {
		return t, invalidf(r.File, n.Line, yamltree.Join(field, "name"), "is missing; say which tool: %s", strings.Join(toolList, ", "))
	}
	return t, nil
}

func (r *definitionReader) model(v *yaml.Node, field string) (string, error) {
	s, err := r.Text(v, field)
	if err != nil {
		return "", err
	}
	if err := CheckModel(s); err != nil {
		return "", invalidf(r.File, v.Line, field, "%s; remove the line to use the tool's default", err.Error())
	}
	return s, nil
}

// CheckModel reports whether s can name a model on an agent's command
// line: an alias like sonnet or a full name like claude-sonnet-4-5@20250929
// or us.anthropic.claude-3-5-haiku-20241022-v1:0, never starting with '-'.
func CheckModel(s string) error {
	if len(s) > 200 || !modelPattern.MatchString(s) {
		return fmt.Errorf("%q is not a model name (like sonnet or claude-sonnet-4-5)", s)
	}
	return nil
}

func (r *definitionReader) repos(v *yaml.Node, field string) ([]Repo, error) {
	items, err := r.List(v, field)
	if err != nil {
		return nil, err
	}
	var out []Repo
	seen := map[string]int{}
	for i, item := range items {
		f := yamltree.Index(field, i)
		repo, err := r.repo(item, f)
		if err != nil {
			return nil, err
		}
		if first, dup := seen[repo.Dir()]; dup {
			return nil, invalidf(r.File, item.Line, f, "clones into %q like the entry on line %d; give one of them its own `path`", repo.Dir(), first)
		}
		seen[repo.Dir()] = item.Line
		out = append(out, repo)
	}
	return out, nil
}

// repo accepts a URL, or {url, path}.
func (r *definitionReader) repo(n *yaml.Node, field string) (Repo, error) {
	var repo Repo
	if n.Kind == yaml.ScalarNode {
		s, err := r.Text(n, field)
		if err != nil {
			return repo, err
		}
		repo.URL = s
		return repo, r.checkURL(n, field, s)
	}
	if n.Kind != yaml.MappingNode {
		return repo, invalidf(r.File, n.Line, field, "must be a repository URL or a mapping {url, path}, not %s", yamltree.Describe(n))
	}
	var urlNode *yaml.Node
	err := r.Mapping(n, field, repoKeys, func(key string, k, v *yaml.Node) error {
		var err error
		switch key {
		case "url":
			urlNode = v
			repo.URL, err = r.Text(v, yamltree.Join(field, "url"))
		case "path":
			repo.Path, err = r.agentPath(v, yamltree.Join(field, "path"))
		}
		return err
	})
	if err != nil {
		return repo, err
	}
	if urlNode == nil {
		return repo, invalidf(r.File, n.Line, yamltree.Join(field, "url"), "is missing; say which repository to clone")
	}
	return repo, r.checkURL(urlNode, yamltree.Join(field, "url"), repo.URL)
}

// checkURL accepts the URLs git clones without running anything: https,
// http, ssh and git URLs and scp-like user@host:path. It refuses leading
// dashes (read as options) and transport::address forms like ext::.
func (r *definitionReader) checkURL(n *yaml.Node, field, s string) error {
	bad := func(why string) error {
		return invalidf(r.File, n.Line, field, "%q %s; use https://host/owner/repo.git, ssh://host/path or git@host:path", s, why)
	}
	switch {
	case s == "":
		return invalidf(r.File, n.Line, field, "is empty; say which repository to clone")
	case strings.HasPrefix(s, "-"):
		return bad("starts with '-'")
	case strings.IndexFunc(s, func(c rune) bool { return unicode.IsSpace(c) || unicode.IsControl(c) }) >= 0:
		return bad("contains spaces or control characters")
	case strings.Contains(s, "::"):
		return bad("uses a transport::address form")
	}
	if i := strings.Index(s, "://"); i > 0 {
		switch strings.ToLower(s[:i]) {
		case "https", "http", "ssh", "git":
		default:
			return bad("uses a scheme git would clone from unsafely or not at all")
		}
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			return bad("is not a valid URL")
		}
		return nil
	}
	if !scpPattern.MatchString(s) {
		return bad("is not a repository URL")
	}
	return nil
}

// agentPath accepts a path inside the instance, absolute or relative to
// the agent's home, that cannot climb out with "..".
func (r *definitionReader) agentPath(v *yaml.Node, field string) (string, error) {
	s, err := r.Text(v, field)
	if err != nil {
		return "", err
	}
	switch {
	case s == "":
		return "", invalidf(r.File, v.Line, field, "is empty; remove the line to use the default")
	case hasControl(s):
		return "", invalidf(r.File, v.Line, field, "contains control characters")
	case strings.HasPrefix(s, "-"), strings.HasPrefix(s, "~"):
		return "", invalidf(r.File, v.Line, field, "%q must be an absolute path or one relative to the agent's home, without a leading - or ~", s)
	case slices.Contains(strings.Split(s, "/"), ".."):
		return "", invalidf(r.File, v.Line, field, "%q contains \"..\"; write the path without it", s)
	}
	return s, nil
}

func hasControl(s string) bool {
	return strings.IndexFunc(s, unicode.IsControl) >= 0
}
