package mcpkit

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The Skills extension (io.modelcontextprotocol/skills): a server serves
// each skill as resources under skill://, lists them with skills/list and
// answers skills/get for one SKILL.md URI.

// SkillsExtension is the extension's identifier, under capabilities.extensions.
const SkillsExtension = "io.modelcontextprotocol/skills"

// The extension's methods.
const (
	MethodListSkills = "skills/list"
	MethodGetSkill   = "skills/get"
)

// SkillResource is one file of a skill, with its digest and size.
type SkillResource struct {
	URI string `json:"uri"`
	// Digest is "sha256:" and 64 lowercase hex digits of the raw bytes.
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
}

// Skill is one skill's entry, the same in skills/list and skills/get.
type Skill struct {
	// URI is the skill's SKILL.md, readable with resources/read.
	URI string `json:"uri"`
	// Frontmatter is the SKILL.md's YAML frontmatter as a JSON object; it
	// always has name and description.
	Frontmatter map[string]any `json:"frontmatter"`
	// Resources lists every file of the skill, SKILL.md included.
	Resources []SkillResource `json:"resources"`
}

// ListSkillsParams are the params of skills/list.
type ListSkillsParams struct {
	mcp.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

// ListSkillsResult answers skills/list.
type ListSkillsResult struct {
	mcp.ResultBase
	ResultType string  `json:"resultType"`
	Skills     []Skill `json:"skills"`
	NextCursor string  `json:"nextCursor,omitempty"`
	TTLMs      int     `json:"ttlMs"`
	CacheScope string  `json:"cacheScope"`
}

// GetSkillParams are the params of skills/get.
type GetSkillParams struct {
	mcp.ParamsBase
	URI string `json:"uri"`
}

// GetSkillResult answers skills/get.
type GetSkillResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
	Skill      Skill  `json:"skill"`
	TTLMs      int    `json:"ttlMs"`
	CacheScope string `json:"cacheScope"`
}

// Digest is a file's digest in the form skill entries carry.
func Digest(content []byte) string {
	sum := sha256.Sum256(content)
	return "sha256:" + hex.EncodeToString(sum[:])
}
