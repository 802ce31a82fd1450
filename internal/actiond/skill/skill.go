// Package skill renders a skill version as the one file an MCP server
// serves for it, SKILL.md, at the URI that names that version, and reads
// such URIs back.
package skill

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// MIMEType is SKILL.md's media type.
const MIMEType = "text/markdown"

// CacheTTLMs is how long a host may keep a skill version's content by its
// URI: an hour (ACT-231). The URI changes with the version.
const CacheTTLMs = 3_600_000

// Tool is a tool the serving MCP server offers, as its external agent sees
// it: Ref is the registry (or native) name a skill's tools name it by.
type Tool struct {
	Ref         string
	Name        string
	Description string
}

// File is a rendered SKILL.md.
type File struct {
	URI     string
	Content []byte
	// Digest is "sha256:" and the hex of the content, as the Skills
	// extension's entries carry it.
	Digest string
	Size   int64
}

// URI is skill://v<version>/<name>/SKILL.md.
func URI(name string, version int) string {
	return "skill://v" + strconv.Itoa(version) + "/" + name + "/SKILL.md"
}

var uriPattern = regexp.MustCompile(`^skill://v([1-9][0-9]{0,9})/([a-z0-9]+(?:-[a-z0-9]+)*)/SKILL\.md$`)

// ParseURI reads a skill URI back; ok is false for anything else.
func ParseURI(uri string) (name string, version int, ok bool) {
	parts := uriPattern.FindStringSubmatch(uri)
	if parts == nil {
		return "", 0, false
	}
	version, err := strconv.Atoi(parts[1])
	if err != nil {
		return "", 0, false
	}
	return parts[2], version, true
}

// IsSkillURI says whether a URI is under skill://, whether or not it names
// a skill this server has.
func IsSkillURI(uri string) bool { return strings.HasPrefix(uri, "skill://") }

// Render is SKILL.md of one skill version as served beside offered, the
// serving server's tools: frontmatter with name and description, the
// instructions, ## Examples, and ## Tools naming only the skill's tools the
// server offers (ACT-232..238). It never declares allowed-tools: a skill
// grants nothing.
func Render(def action.Definition, version int, offered []Tool) File {
	var b strings.Builder
	// name first, as readers of SKILL.md expect it.
	front, _ := yaml.Marshal(&yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
		frontText("name"), frontText(def.Name), frontText("description"), frontText(def.Description),
	}})
	b.WriteString("---\n")
	b.Write(front)
	b.WriteString("---\n\n")
	b.WriteString(strings.TrimSpace(def.SkillInstructions()))
	b.WriteString("\n")
	if examples := def.SkillExamples(); len(examples) > 0 {
		b.WriteString("\n## Examples\n")
		for i, e := range examples {
			fmt.Fprintf(&b, "\n### Example %d\n\n", i+1)
			fmt.Fprintf(&b, "**Situation:** %s\n\n", strings.TrimSpace(e.Situation))
			fmt.Fprintf(&b, "**Resolution:** %s\n\n", strings.TrimSpace(e.Resolution))
			fmt.Fprintf(&b, "**Reason:** %s\n", strings.TrimSpace(e.Reason))
		}
	}
	if tools := named(def, offered); len(tools) > 0 {
		b.WriteString("\n## Tools\n\n")
		for _, t := range tools {
			if t.Description == "" {
				fmt.Fprintf(&b, "- `%s`\n", t.Name)
				continue
			}
			fmt.Fprintf(&b, "- `%s`: %s\n", t.Name, firstLine(t.Description))
		}
	}
	content := []byte(b.String())
	return File{URI: URI(def.Name, version), Content: content, Digest: mcpkit.Digest(content), Size: int64(len(content))}
}

// frontText is a frontmatter string. One with a line break is written
// double-quoted: as a block scalar its trailing line breaks would be the
// last lines before the closing ---, which a reader splitting the file at
// that line does not give back.
func frontText(s string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
	if strings.ContainsAny(s, "\n\r\u0085\u2028\u2029") {
		n.Style = yaml.DoubleQuotedStyle
	}
	return n
}

// Frontmatter is the skill's name and description, the frontmatter of its
// SKILL.md and of its Skills extension entry.
func Frontmatter(def action.Definition) map[string]any {
	return map[string]any{"name": def.Name, "description": def.Description}
}

// named are the skill's tools the server offers, in the skill's order.
func named(def action.Definition, offered []Tool) []Tool {
	var out []Tool
	seen := map[string]bool{}
	for _, ref := range def.Tools {
		for _, t := range offered {
			if t.Ref == ref.Name && !seen[t.Name] {
				seen[t.Name] = true
				out = append(out, t)
			}
		}
	}
	return out
}

func firstLine(text string) string {
	text = strings.TrimSpace(text)
	if i := strings.IndexByte(text, '\n'); i >= 0 {
		return strings.TrimSpace(text[:i])
	}
	return text
}
