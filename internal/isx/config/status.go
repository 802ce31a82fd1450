package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"go.yaml.in/yaml/v3"

	"github.com/incusspawn/isx/internal/isx/yamltree"
)

// Decision is what isx mcp and isx init do about the retired `mcp:`
// section of config.yaml.
type Decision string

const (
	// DecisionFine: no old section; nothing to say.
	DecisionFine Decision = "fine"
	// DecisionRemind: mcp.yaml exists and the old section lingers; work
	// as usual and remind the user to delete the section.
	DecisionRemind Decision = "remind"
	// DecisionRefuse: the old section is there and mcp.yaml is not; isx
	// mcp refuses every call and isx init leaves the MCP step alone, so
	// the old limits are never quietly replaced by the defaults.
	DecisionRefuse Decision = "refuse"
)

// MCPReport is what MCPStatus found.
type MCPReport struct {
	ConfigPath string
	MCPPath    string
	MCPExists  bool
	OldSection bool
	// OldSectionLine is the line of `mcp:` in config.yaml, or 0.
	OldSectionLine int
	Decision       Decision
}

// Message is the sentence to show the user, or "" when all is fine.
func (r MCPReport) Message() string {
	switch r.Decision {
	case DecisionRefuse:
		return fmt.Sprintf("%s:%d has an `mcp:` section, which isx no longer reads, and %s does not exist: "+
			"move the section's contents into %s, un-indenting what was under `mcp:`, and delete the `mcp:` line. "+
			"Until then isx mcp refuses every call and isx init leaves the MCP setup alone.",
			r.ConfigPath, r.OldSectionLine, r.MCPPath, r.MCPPath)
	case DecisionRemind:
		return fmt.Sprintf("%s:%d still has an `mcp:` section, which isx no longer reads (%s is used instead); delete the section.",
			r.ConfigPath, r.OldSectionLine, r.MCPPath)
	}
	return ""
}

// Err is the refusal for DecisionRefuse (code CodeOldMCPSection), else nil.
func (r MCPReport) Err() error {
	if r.Decision != DecisionRefuse {
		return nil
	}
	return &Error{yamltree.Problem(CodeOldMCPSection, yamltree.Place{File: r.ConfigPath, Line: r.OldSectionLine, Key: "mcp"}, nil, "%s", r.Message())}
}

// MCPStatus looks for the retired `mcp:` section in config.yaml and for
// mcp.yaml, and decides. It reads config.yaml only far enough to find the
// key, so that other problems there do not change the decision; a
// config.yaml that is not YAML at all is an error, since then nobody can
// tell.
func MCPStatus(home string) (MCPReport, error) {
	r := MCPReport{ConfigPath: ConfigPath(home), MCPPath: MCPPath(home), Decision: DecisionFine}
	line, err := oldSectionLine(r.ConfigPath)
	if err != nil {
		return r, err
	}
	r.OldSection, r.OldSectionLine = line > 0, line
	switch _, err := os.Stat(r.MCPPath); {
	case err == nil:
		r.MCPExists = true
	case !errors.Is(err, fs.ErrNotExist):
		return r, unusable(r.MCPPath, "cannot be examined", err)
	}
	switch {
	case r.OldSection && r.MCPExists:
		r.Decision = DecisionRemind
	case r.OldSection:
		r.Decision = DecisionRefuse
	}
	return r, nil
}

func oldSectionLine(path string) (int, error) {
	data, exists, err := readFile(path)
	if err != nil || !exists {
		return 0, err
	}
	reader := newReader(path)
	_, root, err := reader.Document(data)
	if err != nil || root == nil || root.Kind != yaml.MappingNode {
		return 0, err
	}
	if i := lookup(root, "mcp"); i >= 0 {
		return root.Content[i].Line, nil
	}
	return 0, nil
}
