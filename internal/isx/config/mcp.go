package config

import (
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/incusspawn/isx/internal/isx/template"
	"github.com/incusspawn/isx/internal/isx/yamltree"
)

// Defaults of mcp.yaml, as seed 001 documents them.
const (
	DefaultMaxInstances           = 8
	DefaultMaxConcurrentTasks     = 8
	DefaultDelegatePermissionMode = "bypassPermissions"
	DefaultCodexSandboxMode       = "danger-full-access"
	DefaultOrphanGraceHours       = 24
	DefaultDormantAfterHours      = 24
	DefaultDormantGraceHours      = 168
	DefaultSummaryModel           = "haiku"
)

// Bounds of mcp.yaml's numbers. Counts may be 0: max-instances: 0 or
// max-concurrent-tasks: 0 is a clear way to stop agents creating instances
// or starting tasks without withdrawing approvals. Hours may not: a grace
// of 0 would destroy an orphan (or stop a quiet delegate) at the very next
// isx mcp start, which is exactly when a restarting coordinator comes back
// to adopt its workers. The upper bounds only catch typos and keep hours
// well inside time.Duration.
const (
	MaxCount = 1_000_000
	MinHours = 1
	MaxHours = 876_000 // 100 years
)

// ClaudePermissionModes are the values Claude Code's --permission-mode takes.
var ClaudePermissionModes = []string{"default", "acceptEdits", "plan", "bypassPermissions", "dontAsk"}

// CodexSandboxModes are the values Codex's sandbox mode takes.
var CodexSandboxModes = []string{"read-only", "workspace-write", "danger-full-access"}

// FileState says whether mcp.yaml was there and had anything in it.
type FileState string

const (
	FileMissing FileState = "missing"
	FileEmpty   FileState = "empty" // exists, but holds no YAML document
	FilePresent FileState = "present"
)

// MCP is mcp.yaml, with defaults filled in. A missing or empty file
// approves no template and has every default.
type MCP struct {
	Path  string
	State FileState

	Templates               []string
	MaxInstances            int
	MaxConcurrentTasks      int
	DelegatePermissionMode  string
	DelegatePermissionModes map[string]string
	Codex                   CodexSettings
	OrphanGraceHours        int
	DormantAfterHours       int
	DormantGraceHours       int
	SummaryModel            string
	// Warm is how many ready copies of each template isx mcp keeps (warm:),
	// for create_instance to take instead of copying. Only approved
	// templates get any: see WarmCount.
	Warm map[string]int
}

// CodexSettings is mcp.yaml's codex: block.
type CodexSettings struct {
	SandboxMode  string
	SandboxModes map[string]string
	// SandboxModeSet says sandbox-mode was written out rather than left
	// to its default.
	SandboxModeSet bool
}

func defaultMCP(path string, state FileState) *MCP {
	return &MCP{
		Path:                    path,
		State:                   state,
		MaxInstances:            DefaultMaxInstances,
		MaxConcurrentTasks:      DefaultMaxConcurrentTasks,
		DelegatePermissionMode:  DefaultDelegatePermissionMode,
		DelegatePermissionModes: map[string]string{},
		Codex:                   CodexSettings{SandboxMode: DefaultCodexSandboxMode, SandboxModes: map[string]string{}},
		OrphanGraceHours:        DefaultOrphanGraceHours,
		DormantAfterHours:       DefaultDormantAfterHours,
		DormantGraceHours:       DefaultDormantGraceHours,
		SummaryModel:            DefaultSummaryModel,
		Warm:                    map[string]int{},
	}
}

// MaxWarm bounds a template's warm: count. Every copy is a stopped
// instance on the user's disk, so a typo of 1000 for 10 is refused
// rather than filled.
const MaxWarm = 64

// WarmCount is how many ready copies of template the warm pool keeps:
// its warm: entry while mcp.yaml approves it, else none (a withdrawn
// approval empties the pool as a removed entry does).
func (m *MCP) WarmCount(template string) int {
	if !m.Approves(template) {
		return 0
	}
	return m.Warm[template]
}

// Approves reports whether mcp.yaml lists the template under templates:.
// Whether the template may be used at all (it is not project-local, it is
// built) is for the caller to check as well.
func (m *MCP) Approves(name string) bool {
	return contains(m.Templates, name)
}

// OrphanGrace is orphan-grace-hours as a duration.
func (m *MCP) OrphanGrace() time.Duration { return time.Duration(m.OrphanGraceHours) * time.Hour }

// DormantAfter is dormant-after-hours as a duration.
func (m *MCP) DormantAfter() time.Duration { return time.Duration(m.DormantAfterHours) * time.Hour }

// DormantGrace is dormant-grace-hours as a duration.
func (m *MCP) DormantGrace() time.Duration { return time.Duration(m.DormantGraceHours) * time.Hour }

// ClaudePermissionMode is the --permission-mode Claude Code runs with on
// template: its delegate-permission-modes entry, else
// delegate-permission-mode.
func (m *MCP) ClaudePermissionMode(template string) string {
	if mode, ok := m.DelegatePermissionModes[template]; ok {
		return mode
	}
	return m.DelegatePermissionMode
}

// CodexSandboxMode is the sandbox Codex runs in on template: its
// codex.sandbox-modes entry, else codex.sandbox-mode. When Claude's mode
// on the template is restricted (anything but bypassPermissions), the
// section-wide sandbox-mode does not apply to a template restricted by
// its own delegate-permission-modes entry, and its default does not apply
// under a restricted delegate-permission-mode: the user must say which
// sandbox, and until then Codex is refused rather than given full access.
func (m *MCP) CodexSandboxMode(template string) (string, error) {
	if mode, ok := m.Codex.SandboxModes[template]; ok {
		return mode, nil
	}
	if m.ClaudePermissionMode(template) == DefaultDelegatePermissionMode {
		return m.Codex.SandboxMode, nil
	}
	if _, own := m.DelegatePermissionModes[template]; !own && m.Codex.SandboxModeSet {
		return m.Codex.SandboxMode, nil
	}
	return "", &Error{yamltree.Problem(CodeSandboxModeRequired, yamltree.Place{File: m.Path, Key: "codex.sandbox-modes"}, nil, "Claude runs template %s with permission mode %s, so Codex needs a sandbox mode of its own for it; add `%s: read-only` (or workspace-write) under codex: sandbox-modes:",
		template, m.ClaudePermissionMode(template), template)}
}

// LoadMCP reads mcp.yaml. It never writes it, and reads it whole each
// time (it is meant to be called on every MCP call, so that an edit takes
// effect on the next one). Unreadable, malformed, an unknown key or a bad
// value: an *Error with CodeInvalid naming the file's full path and what
// is wrong.
func LoadMCP(home string) (*MCP, error) {
	path := MCPPath(home)
	data, exists, err := readFile(path)
	if err != nil {
		return nil, err
	}
	if !exists {
		return defaultMCP(path, FileMissing), nil
	}
	return parseMCP(data, path)
}

var (
	mcpKeys   = []string{"templates", "max-instances", "max-concurrent-tasks", "delegate-permission-mode", "delegate-permission-modes", "codex", "orphan-grace-hours", "dormant-after-hours", "dormant-grace-hours", "summary-model", "warm"}
	codexKeys = []string{"sandbox-mode", "sandbox-modes"}
)

// retiredHint explains keys that earlier releases accepted.
func retiredHint(key string) string {
	if strings.Contains(key, "max-turns") || strings.Contains(key, "max_turns") {
		return "turn limits are no longer supported (no agent runs under one); delete the line"
	}
	return ""
}

func parseMCP(data []byte, path string) (*MCP, error) {
	r := newReader(path)
	r.Hint = retiredHint
	_, root, err := r.Document(data)
	if err != nil {
		return nil, err
	}
	if root == nil {
		return defaultMCP(path, FileEmpty), nil
	}
	m := defaultMCP(path, FilePresent)
	err = r.Mapping(root, "", mcpKeys, func(key string, _, v *yaml.Node) error {
		var err error
		switch key {
		case "templates":
			m.Templates, err = r.templateNames(v, key)
		case "max-instances":
			m.MaxInstances, err = r.count(v, key, 0, MaxCount)
		case "max-concurrent-tasks":
			m.MaxConcurrentTasks, err = r.count(v, key, 0, MaxCount)
		case "delegate-permission-mode":
			m.DelegatePermissionMode, err = r.oneOf(v, key, ClaudePermissionModes, "Claude permission mode")
		case "delegate-permission-modes":
			m.DelegatePermissionModes, err = r.modes(v, key, ClaudePermissionModes, "Claude permission mode")
		case "codex":
			err = r.codex(v, &m.Codex)
		case "orphan-grace-hours":
			m.OrphanGraceHours, err = r.count(v, key, MinHours, MaxHours)
		case "dormant-after-hours":
			m.DormantAfterHours, err = r.count(v, key, MinHours, MaxHours)
		case "dormant-grace-hours":
			m.DormantGraceHours, err = r.count(v, key, MinHours, MaxHours)
		case "summary-model":
			m.SummaryModel, err = r.model(v, key)
		case "warm":
			m.Warm, err = r.warm(v, key)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (r *nodeReader) codex(n *yaml.Node, c *CodexSettings) error {
	return r.Mapping(n, "codex", codexKeys, func(key string, _, v *yaml.Node) error {
		var err error
		switch key {
		case "sandbox-mode":
			c.SandboxMode, err = r.oneOf(v, "codex.sandbox-mode", CodexSandboxModes, "Codex sandbox mode")
			c.SandboxModeSet = err == nil
		case "sandbox-modes":
			c.SandboxModes, err = r.modes(v, "codex.sandbox-modes", CodexSandboxModes, "Codex sandbox mode")
		}
		return err
	})
}

// templateNames reads a list of template names, keeping the first of any
// repeated name.
func (r *nodeReader) templateNames(n *yaml.Node, key string) ([]string, error) {
	names, err := r.textList(n, key)
	if err != nil {
		return nil, err
	}
	var out []string
	for i, name := range names {
		if err := template.CheckName(name); err != nil {
			return nil, invalidf(r.File, n.Content[i].Line, fmt.Sprintf("%s[%d]", key, i), "%s", err.Error())
		}
		if !contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}

func (r *nodeReader) oneOf(n *yaml.Node, key string, allowed []string, what string) (string, error) {
	s, err := r.text(n, key)
	if err != nil {
		return "", err
	}
	if !contains(allowed, s) {
		return "", invalidf(r.File, n.Line, key, "%q is not a %s; use one of %s", s, what, strings.Join(allowed, ", "))
	}
	return s, nil
}

// modes reads a mapping of template name to one of allowed.
func (r *nodeReader) modes(n *yaml.Node, key string, allowed []string, what string) (map[string]string, error) {
	out := map[string]string{}
	err := r.Mapping(n, key, nil, func(name string, kn, v *yaml.Node) error {
		if err := template.CheckName(name); err != nil {
			return invalidf(r.File, kn.Line, yamltree.Join(key, name), "%s", err.Error())
		}
		mode, err := r.oneOf(v, yamltree.Join(key, name), allowed, what)
		out[name] = mode
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// warm reads warm:, a mapping of template name to a count of copies.
func (r *nodeReader) warm(n *yaml.Node, key string) (map[string]int, error) {
	out := map[string]int{}
	err := r.Mapping(n, key, nil, func(name string, kn, v *yaml.Node) error {
		if err := template.CheckName(name); err != nil {
			return invalidf(r.File, kn.Line, yamltree.Join(key, name), "%s", err.Error())
		}
		count, err := r.count(v, yamltree.Join(key, name), 0, MaxWarm)
		out[name] = count
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (r *nodeReader) model(n *yaml.Node, key string) (string, error) {
	s, err := r.text(n, key)
	if err != nil {
		return "", err
	}
	if err := template.CheckModel(s); err != nil {
		return "", invalidf(r.File, n.Line, key, "%s", err.Error())
	}
	return s, nil
}

// SaveMCPTemplates sets mcp.yaml's templates: list, for `isx init`. Only
// that list changes: every other key, the comments and the list's own
// style are kept. A missing or empty file becomes `templates: [...]`.
// isx mcp never calls this; nothing but isx init writes mcp.yaml.
func SaveMCPTemplates(home string, templates []string) error {
	path := MCPPath(home)
	var names []string
	for i, name := range templates {
		if err := template.CheckName(name); err != nil {
			return invalidf(path, 0, fmt.Sprintf("templates[%d]", i), "%s", err.Error())
		}
		if !contains(names, name) {
			names = append(names, name)
		}
	}
	data, _, err := readFile(path)
	if err != nil {
		return err
	}
	r := newReader(path)
	doc, root, err := r.Document(data)
	if err != nil {
		return err
	}
	if root == nil {
		doc = newDocument()
		root = doc.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return invalidf(path, root.Line, "", "must be a mapping of settings, not %s; fix it before isx init changes the approved templates", yamltree.Describe(root))
	}
	setTemplates(root, names)
	out, err := encode(doc)
	if err != nil {
		return unusable(path, "cannot be encoded", err)
	}
	return writeAtomic(path, out)
}

func setTemplates(root *yaml.Node, names []string) {
	i := lookup(root, "templates")
	if i < 0 {
		root.Content = append([]*yaml.Node{textNode("templates"), listNode(names, true)}, root.Content...)
		return
	}
	list := root.Content[i+1]
	if list.Kind != yaml.SequenceNode {
		setValue(root, "templates", listNode(names, true))
		return
	}
	if len(names) == 0 && list.Style&yaml.FlowStyle == 0 {
		// An empty block list cannot be written; [] can.
		setValue(root, "templates", listNode(nil, true))
		return
	}
	list.Content = listNode(names, false).Content
}
