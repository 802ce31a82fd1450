package skill_test

import (
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/skill"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// ACT-228, ACT-229, ACT-232, ACT-233, ACT-234, ACT-235, ACT-236, ACT-237, ACT-238: the file's parts in order, only offered tools named, and
// the URI read back; anything else under skill:// is not a skill URI.
func TestRenderAndURIs(t *testing.T) {
	def := action.Definition{Name: "fraud-review", Description: "Reviewing: fraud.", Kind: action.KindSkill,
		Config: map[string]any{"instructions": "Read first.", "examples": []any{map[string]any{"situation": "S", "resolution": "R", "reason": "Why"}}},
		Tools:  []action.ToolRef{{Name: "get_account"}, {Name: "close_account"}}}
	file := skill.Render(def, 3, []skill.Tool{{Ref: "get_account", Name: "get_account", Description: "Reads an account.\nMore."}})
	text := string(file.Content)
	want := "---\nname: fraud-review\ndescription: 'Reviewing: fraud.'\n---\n\nRead first.\n\n## Examples\n\n### Example 1\n\n**Situation:** S\n\n**Resolution:** R\n\n**Reason:** Why\n\n## Tools\n\n- `get_account`: Reads an account.\n"
	if text != want {
		t.Errorf("SKILL.md:\n%s\nwant:\n%s", text, want)
	}
	if file.URI != "skill://v3/fraud-review/SKILL.md" || file.Digest != mcpkit.Digest(file.Content) || file.Size != int64(len(text)) {
		t.Errorf("file %s %s %d", file.URI, file.Digest, file.Size)
	}
	if noTools := skill.Render(def, 3, nil); strings.Contains(string(noTools.Content), "## Tools") {
		t.Errorf("a skill none of whose tools is offered has a Tools section:\n%s", noTools.Content)
	}
	name, version, ok := skill.ParseURI(file.URI)
	if !ok || name != "fraud-review" || version != 3 {
		t.Errorf("ParseURI = %q %d %v", name, version, ok)
	}
	for _, bad := range []string{"skill://v0/a/SKILL.md", "skill://v1/A/SKILL.md", "skill://v1/a/other.md", "skill://1/a/SKILL.md", "file://v1/a/SKILL.md"} {
		if _, _, ok := skill.ParseURI(bad); ok {
			t.Errorf("ParseURI accepted %s", bad)
		}
	}
}
