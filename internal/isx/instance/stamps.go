// Package instance is the lifecycle of isx instances that the CLI and
// `isx mcp` share: the stamps isx keeps in each instance's Incus config
// (there is no side database), branching from a built template, listing,
// destroying, and knowing when a person is in an instance with `isx shell`.
package instance

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/incusspawn/isx/internal/isx/template"
)

// Prefix starts every config key isx stamps on an instance.
const Prefix = "user.isx."

// Stamp keys. docs/design.md lists what each means.
const (
	KeyType           = Prefix + "type"            // TypeBase or TypeInstance
	KeyTemplate       = Prefix + "template"        // template built or branched from
	KeyDefinitionHash = Prefix + "definition-hash" // hash of the template's definition chain
	KeyVersion        = Prefix + "version"         // isx version that built it
	KeySource         = Prefix + "source"          // builtin, user, search-path or project-local
	KeyOwner          = Prefix + "owner"           // host user who made it
	KeyCreated        = Prefix + "created"         // RFC 3339
	KeyNetwork        = Prefix + "network"         // default, proxy-only or airgap
	// KeyTools holds the template's agent tools as JSON (see Tool), so that
	// isx mcp can report them without reading the definition.
	KeyTools = Prefix + "tools"

	// Keys of a warm pool's copy (TypeWarm); taking it removes both.
	// KeyWarm is the build stamp (see BuildStamp) of the template it is a
	// copy of; KeyWarmFilling the session still copying it, until the copy
	// is done.
	KeyWarm        = Prefix + "warm"
	KeyWarmFilling = Prefix + "warm-filling"

	// Keys isx mcp writes.
	KeyMCPSession        = Prefix + "mcp-session"
	KeyMCPOwner          = Prefix + "mcp-owner"
	KeyMCPPurpose        = Prefix + "mcp-purpose"
	KeyMCPOrphaned       = Prefix + "mcp-orphaned" // "<RFC 3339> <session>"
	KeyMCPKept           = Prefix + "mcp-kept"
	KeyMCPIdempotencyKey = Prefix + "mcp-idempotency-key"
	KeyMCPCaller         = Prefix + "mcp-caller"
	KeyMCPDormant        = Prefix + "mcp-dormant"
	// KeyMCPState marks an instance that is not simply ready: "creating"
	// from the moment it is reserved until it has started and answers;
	// "destroying <session>" or "stopping <session>" while a session acts
	// on it after marking it (mark, re-read, act).
	KeyMCPState = Prefix + "mcp-state"
	// KeyMCPSource is what create_instance was asked to copy:
	// "template:<name>" or "instance:<name>", which a repeat of its
	// idempotency key must ask for again.
	KeyMCPSource = Prefix + "mcp-source"
	// KeyMCPRunning lists, space-separated, the ids of the background tasks
	// believed running in the instance, so that max-concurrent-tasks is
	// counted without running anything in instances.
	KeyMCPRunning = Prefix + "mcp-running"
	// KeyMCPTaskKeys lists, space-separated, the idempotency keys of the
	// instance's background tasks, so that a repeat naming another
	// instance is refused.
	KeyMCPTaskKeys = Prefix + "mcp-task-keys"
)

// MCPPrefix starts every key isx mcp writes.
const MCPPrefix = Prefix + "mcp-"

// Values of KeyType.
const (
	TypeBase     = "base"     // a built template
	TypeInstance = "instance" // a branch of a template
	// TypeBuild is a template being built whose tools clone repositories:
	// the host proxy serves it, with its template's accounts, until the
	// build stamps it TypeBase.
	TypeBuild = "build"
	// TypeWarm is a stopped copy of a template kept in a warm pool: no
	// list shows it and no limit counts it until a create takes it and
	// stamps it TypeInstance.
	TypeWarm = "warm"
)

// BuildStamp says which build of a template an instance is: Incus's
// own id of the instance (every build makes a new one and renames it into
// place) with the time isx stamped the build. A warm copy whose KeyWarm
// differs from its template's BuildStamp is stale.
func BuildStamp(config map[string]string) string {
	return config["volatile.uuid"] + " " + config[KeyCreated]
}

// Stamps is what isx stamped on an instance, parsed from its Incus
// config. Missing keys read as empty; a malformed time reads as zero (the
// raw text stays in the config).
type Stamps struct {
	Type           string
	Template       string
	DefinitionHash string
	Version        string
	Source         string
	Owner          string
	Created        time.Time
	Network        Network
	// ToolsJSON is KeyTools as stamped; Tools decodes it.
	ToolsJSON string
	MCP       MCPStamps
}

// MCPStamps are the keys isx mcp keeps on an instance.
type MCPStamps struct {
	Session        string
	Owner          string
	Purpose        string
	Orphaned       string // as stamped: "<RFC 3339> <session>"
	Kept           string
	IdempotencyKey string
	Caller         string
	Dormant        string
	State          string // as stamped: "creating", "destroying <session>" …
	Source         string
	Running        string
	TaskKeys       string
}

// ParseStamps reads the stamps from an instance's config (use the
// instance's own Config, not ExpandedConfig: profiles carry no stamps).
func ParseStamps(config map[string]string) Stamps {
	s := Stamps{
		Type:           config[KeyType],
		Template:       config[KeyTemplate],
		DefinitionHash: config[KeyDefinitionHash],
		Version:        config[KeyVersion],
		Source:         config[KeySource],
		Owner:          config[KeyOwner],
		Network:        Network(config[KeyNetwork]),
		ToolsJSON:      config[KeyTools],
		MCP: MCPStamps{
			Session:        config[KeyMCPSession],
			Owner:          config[KeyMCPOwner],
			Purpose:        config[KeyMCPPurpose],
			Orphaned:       config[KeyMCPOrphaned],
			Kept:           config[KeyMCPKept],
			IdempotencyKey: config[KeyMCPIdempotencyKey],
			Caller:         config[KeyMCPCaller],
			Dormant:        config[KeyMCPDormant],
			State:          config[KeyMCPState],
			Source:         config[KeyMCPSource],
			Running:        config[KeyMCPRunning],
			TaskKeys:       config[KeyMCPTaskKeys],
		},
	}
	if t, err := time.Parse(time.RFC3339, config[KeyCreated]); err == nil {
		s.Created = t
	}
	return s
}

// Managed reports whether isx made the instance (it has a type stamp).
func (s Stamps) Managed() bool { return s.Type == TypeBase || s.Type == TypeInstance }

// IsTemplate reports whether the instance is a built template.
func (s Stamps) IsTemplate() bool { return s.Type == TypeBase }

// Config is the stamps as config keys, leaving out the empty ones.
func (s Stamps) Config() map[string]string {
	out := map[string]string{}
	put := func(key, value string) {
		if value != "" {
			out[key] = value
		}
	}
	put(KeyType, s.Type)
	put(KeyTemplate, s.Template)
	put(KeyDefinitionHash, s.DefinitionHash)
	put(KeyVersion, s.Version)
	put(KeySource, s.Source)
	put(KeyOwner, s.Owner)
	if !s.Created.IsZero() {
		put(KeyCreated, FormatTime(s.Created))
	}
	put(KeyNetwork, string(s.Network))
	put(KeyTools, s.ToolsJSON)
	for k, v := range s.MCP.Config() {
		out[k] = v
	}
	return out
}

// Config is the MCP stamps as config keys, leaving out the empty ones.
func (m MCPStamps) Config() map[string]string {
	out := map[string]string{}
	for key, value := range map[string]string{
		KeyMCPSession:        m.Session,
		KeyMCPOwner:          m.Owner,
		KeyMCPPurpose:        m.Purpose,
		KeyMCPOrphaned:       m.Orphaned,
		KeyMCPKept:           m.Kept,
		KeyMCPIdempotencyKey: m.IdempotencyKey,
		KeyMCPCaller:         m.Caller,
		KeyMCPDormant:        m.Dormant,
		KeyMCPState:          m.State,
		KeyMCPSource:         m.Source,
		KeyMCPRunning:        m.Running,
		KeyMCPTaskKeys:       m.TaskKeys,
	} {
		if value != "" {
			out[key] = value
		}
	}
	return out
}

// Any reports whether isx mcp has stamped anything on the instance.
func (m MCPStamps) Any() bool { return len(m.Config()) > 0 }

// Label is what `isx list` shows in its MCP column: "kept: <purpose>",
// "orphaned" or "held: <purpose>" (without ": <purpose>" when there is
// none), or "" for an instance isx mcp does not manage. Kept wins over
// orphaned, which wins over held: an orphan's session stamp stays until
// another session adopts it.
func (m MCPStamps) Label() string {
	switch state := m.Holding(); {
	case state == "", state == "orphaned", m.Purpose == "":
		return state
	default:
		return state + ": " + m.Purpose
	}
}

// Holding is the word of Label without the purpose: "kept", "orphaned",
// "held", or "" for an instance isx mcp does not manage.
func (m MCPStamps) Holding() string {
	switch {
	case m.Kept != "":
		return "kept"
	case m.Orphaned != "":
		return "orphaned"
	case m.Session != "":
		return "held"
	}
	return ""
}

// OrphanedAt splits the orphaned stamp into when and by which session the
// instance was orphaned; ok is false when it is missing or malformed.
func (m MCPStamps) OrphanedAt() (at time.Time, session string, ok bool) {
	when, session, found := strings.Cut(m.Orphaned, " ")
	if !found {
		return time.Time{}, "", false
	}
	t, err := time.Parse(time.RFC3339, when)
	if err != nil {
		return time.Time{}, "", false
	}
	return t, session, true
}

// OrphanedValue is the orphaned stamp for a session ended at t.
func OrphanedValue(t time.Time, session string) string {
	return FormatTime(t) + " " + session
}

// FormatTime is how isx stamps times: RFC 3339 in UTC, to the second.
func FormatTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// ClearMCP returns config keys that, merged into an instance's config,
// remove every MCP stamp present in config.
func ClearMCP(config map[string]string) map[string]string {
	out := map[string]string{}
	for key := range config {
		if strings.HasPrefix(key, MCPPrefix) {
			out[key] = ""
		}
	}
	return out
}

// Tool is one agent tool of a template as stamped in KeyTools.
type Tool struct {
	Name      string `json:"name"`
	Model     string `json:"model,omitempty"`
	Repos     []Repo `json:"repos,omitempty"`
	Workdir   string `json:"workdir,omitempty"`
	AgentNote string `json:"agent_note,omitempty"`
}

// Repo is a repository an agent tool works in.
type Repo struct {
	URL  string `json:"url"`
	Path string `json:"path,omitempty"`
}

// ToolsOf converts a definition's tools to their stamped form.
func ToolsOf(tools []template.Tool) []Tool {
	out := make([]Tool, 0, len(tools))
	for _, t := range tools {
		tool := Tool{Name: t.Name, Model: t.Model, Workdir: t.Workdir, AgentNote: t.AgentNote}
		for _, r := range t.Repos {
			tool.Repos = append(tool.Repos, Repo{URL: r.URL, Path: r.Path})
		}
		out = append(out, tool)
	}
	return out
}

// EncodeTools is the KeyTools value for tools ("" for none).
func EncodeTools(tools []Tool) (string, error) {
	if len(tools) == 0 {
		return "", nil
	}
	data, err := json.Marshal(tools)
	if err != nil {
		return "", fmt.Errorf("encoding the tools stamp: %w", err)
	}
	return string(data), nil
}

// Tools decodes the tools stamp; an instance without one has no tools.
func (s Stamps) Tools() ([]Tool, error) {
	if s.ToolsJSON == "" {
		return nil, nil
	}
	var tools []Tool
	if err := json.Unmarshal([]byte(s.ToolsJSON), &tools); err != nil {
		return nil, fmt.Errorf("the %s stamp is not valid JSON: %w", KeyTools, err)
	}
	return tools, nil
}
