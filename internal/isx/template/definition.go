// Package template reads isx template definitions: YAML files that say how
// to build a template instance (its image or parent, packages, steps, files,
// environment and agent tools), where each came from, whether it may be
// trusted, how definitions chain through their parents, and a content hash
// that tells a built instance it is stale.
package template

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"path"
	"sort"
	"strings"
)

// SourceKind says where a definition was found.
type SourceKind string

const (
	SourceBuiltin      SourceKind = "builtin"
	SourceUser         SourceKind = "user"
	SourceSearchPath   SourceKind = "search-path"
	SourceProjectLocal SourceKind = "project-local"
)

// Source is where a definition was read from. Trusted is set by the loader
// from Kind alone, never from anything in the file.
type Source struct {
	Kind    SourceKind
	Path    string // the definition's file (for built-ins, "builtin:<file>")
	Trusted bool
}

// Users a step or file can belong to inside the instance.
const (
	UserRoot  = "root"
	UserAgent = "agent"
)

// Agent tools a template can install and configure.
const (
	ToolClaude   = "claude"
	ToolCodex    = "codex"
	ToolPi       = "pi"
	ToolOpencode = "opencode"
)

// Kinds of credential account a template names, each the account of one
// tool family: the host proxy injects it into the requests of the
// template's instances (config.Accounts holds the credentials).
const (
	AccountClaude = "claude" // Anthropic: an API key or an OAuth token
	AccountOpenAI = "openai" // OpenAI: an API key
	AccountGitHub = "github" // GitHub: a token, for git and the API
)

// AccountKinds lists the kinds, in the order documents show them.
var AccountKinds = []string{AccountClaude, AccountOpenAI, AccountGitHub}

// Definition is one template, validated. Fields hold what the file says,
// with defaults filled in (a step's user, a file's owner).
type Definition struct {
	Name        string
	Description string
	// Parent is the template this one builds on; exactly one of Parent and
	// Image is set.
	Parent string
	// Image is the base image as written: an Incus image alias, or a path
	// to a local unified image tarball.
	Image string
	// ImageFile is the absolute path of that tarball (relative paths are
	// resolved against the definition's directory); empty for an alias.
	ImageFile string
	Packages  []string
	Run       []Step
	Files     []File
	Env       map[string]string
	Tools     []Tool
	// Accounts names, by kind (AccountClaude, …), the credential account
	// of config.Accounts the host proxy uses for the template's instances.
	Accounts map[string]string

	Source Source

	parentLine int
}

// Step is one shell command run while building, in order.
type Step struct {
	Name string // optional, for progress output
	Run  string // shell script
	User string // UserRoot or UserAgent
}

// File is written into the instance while building.
type File struct {
	Path    string // absolute
	Content string
	Mode    uint32 // permission bits; 0 when the definition gives none
	HasMode bool
	Owner   string // UserRoot or UserAgent
}

// Tool is an agent installed and configured in the template.
type Tool struct {
	Name      string // ToolClaude, ToolCodex, ToolPi or ToolOpencode
	Model     string
	Repos     []Repo
	Workdir   string
	AgentNote string
}

// MergeTools are the agent tools of a chain of definitions, parents first:
// a child's entry for a tool replaces its parent's, in the parent's place.
func MergeTools(chain []*Definition) []Tool {
	var tools []Tool
	for _, def := range chain {
		for _, t := range def.Tools {
			replaced := false
			for i := range tools {
				if tools[i].Name == t.Name {
					tools[i], replaced = t, true
				}
			}
			if !replaced {
				tools = append(tools, t)
			}
		}
	}
	return tools
}

// MergeAccounts are the accounts of a chain of definitions, parents
// first: a child's entry for a kind replaces its parent's.
func MergeAccounts(chain []*Definition) map[string]string {
	out := map[string]string{}
	for _, def := range chain {
		for kind, name := range def.Accounts {
			out[kind] = name
		}
	}
	return out
}

// Repo is a repository cloned for an agent tool.
type Repo struct {
	URL string
	// Path is where it is cloned: absolute, or relative to the agent's
	// home; empty means Dir().
	Path string
}

// Dir is where the repository is cloned: Path, or else the last element
// of the URL without ".git".
func (r Repo) Dir() string {
	if r.Path != "" {
		return r.Path
	}
	u := strings.TrimRight(r.URL, "/")
	if i := strings.LastIndexAny(u, "/:"); i >= 0 {
		u = u[i+1:]
	}
	return strings.TrimSuffix(u, ".git")
}

// ProjectLocal reports whether the definition came from a project's
// .incus-spawn/ directory. Such definitions are never trusted, and can
// never be used through MCP.
func (d *Definition) ProjectLocal() bool {
	return d.Source.Kind == SourceProjectLocal
}

// ImageAlias is the Incus alias the definition builds on, or "" when it
// names a parent or a local tarball.
func (d *Definition) ImageAlias() string {
	if d.ImageFile != "" {
		return ""
	}
	return d.Image
}

// Tool returns the definition's entry for the named agent tool.
func (d *Definition) Tool(name string) (Tool, bool) {
	for _, t := range d.Tools {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

// hashVersion is part of every hash so that a change to the canonical
// encoding makes every built template stale rather than silently equal.
const hashVersion = "isx.template/v1"

// Hash is the hex sha256 of the definition's content in a canonical
// encoding: changing any field changes it, while formatting, comments, key
// order and the file's location do not. Defaults are filled in first, so
// `user: root` written out or left implicit hash the same. Steps, files,
// packages, tools and repositories keep their order, since a reordering
// can change a build. Every string is length-prefixed, so no two different
// definitions share an encoding.
func (d *Definition) Hash() string {
	e := canonicalEncoder{h: sha256.New()}
	e.text("v", hashVersion)
	e.text("name", d.Name)
	e.text("description", d.Description)
	e.text("parent", d.Parent)
	e.text("image", d.Image)
	e.count("packages", len(d.Packages))
	for _, p := range d.Packages {
		e.text("package", p)
	}
	e.count("run", len(d.Run))
	for _, s := range d.Run {
		e.text("step.name", s.Name)
		e.text("step.run", s.Run)
		e.text("step.user", orDefault(s.User, UserRoot))
	}
	e.count("files", len(d.Files))
	for _, f := range d.Files {
		e.text("file.path", f.Path)
		e.text("file.content", f.Content)
		if f.HasMode {
			e.count("file.mode", int(f.Mode))
		} else {
			e.text("file.mode", "unset")
		}
		e.text("file.owner", orDefault(f.Owner, UserRoot))
	}
	names := make([]string, 0, len(d.Env))
	for k := range d.Env {
		names = append(names, k)
	}
	sort.Strings(names)
	e.count("env", len(names))
	for _, k := range names {
		e.text("env.name", k)
		e.text("env.value", d.Env[k])
	}
	e.count("tools", len(d.Tools))
	for _, t := range d.Tools {
		e.text("tool.name", t.Name)
		e.text("tool.model", t.Model)
		e.count("tool.repos", len(t.Repos))
		for _, r := range t.Repos {
			e.text("repo.url", r.URL)
			e.text("repo.path", r.Path)
		}
		e.text("tool.workdir", t.Workdir)
		e.text("tool.agent_note", t.AgentNote)
	}
	// Written only when there are accounts, so that the hash of every
	// definition without them stays what it was.
	if len(d.Accounts) > 0 {
		e.count("accounts", len(d.Accounts))
		for _, kind := range AccountKinds {
			if name, ok := d.Accounts[kind]; ok {
				e.text("account.kind", kind)
				e.text("account.name", name)
			}
		}
	}
	return hex.EncodeToString(e.h.Sum(nil))
}

type canonicalEncoder struct{ h hash.Hash }

func (e canonicalEncoder) text(tag, s string) {
	fmt.Fprintf(e.h, "%s:%d:", tag, len(s))
	io.WriteString(e.h, s)
}

func (e canonicalEncoder) count(tag string, n int) {
	fmt.Fprintf(e.h, "%s#%d;", tag, n)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// chainHash combines the hashes of a chain, parents first.
func chainHash(chain []*Definition) string {
	h := sha256.New()
	h.Write([]byte("isx.chain/v1\n"))
	for _, d := range chain {
		h.Write([]byte(d.Name))
		h.Write([]byte{'\n'})
		h.Write([]byte(d.Hash()))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// builtinPath names a built-in definition in messages and in Source.Path.
func builtinPath(file string) string {
	return "builtin:" + path.Base(file)
}
