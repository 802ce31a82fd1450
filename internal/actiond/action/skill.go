package action

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// A skill (kind skill) is read, not run: config {instructions, examples?}
// and the tools it names in its tools references. The tools it names grant
// nothing: an MCP server mentions only those it offers itself, and an agent
// calls only the tools it lists.

// SkillExample is one worked case of a skill: the situation, what resolved
// it, and why that was right.
type SkillExample struct {
	Situation  string `json:"situation"`
	Resolution string `json:"resolution"`
	Reason     string `json:"reason"`
}

// Bounds of a skill's config.
const (
	MaxSkillInstructions = 64 << 10
	MaxSkillExamples     = 32
	MaxSkillExampleText  = 4096
)

// SkillInstructions is a skill's config.instructions.
func (d Definition) SkillInstructions() string {
	s, _ := d.Config["instructions"].(string)
	return s
}

// SkillExamples are a skill's config.examples; a stored definition was
// validated, so an unreadable entry is left out.
func (d Definition) SkillExamples() []SkillExample {
	list, _ := d.Config["examples"].([]any)
	var out []SkillExample
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		situation, _ := m["situation"].(string)
		resolution, _ := m["resolution"].(string)
		reason, _ := m["reason"].(string)
		out = append(out, SkillExample{Situation: situation, Resolution: resolution, Reason: reason})
	}
	return out
}

// SkillDescribed reports whether a skill's name and description still meet
// the Agent Skills rules; one that does not is left out of every listing
// (ACT-254).
func SkillDescribed(d Definition) bool {
	return checkSkillIdentity("name", "description", d.Name, d.Description) == nil
}

func checkSkillConfig(config map[string]any) error {
	if err := onlyKeys(config, "instructions", "examples"); err != nil {
		return err
	}
	instructions, ok := config["instructions"].(string)
	if !ok || strings.TrimSpace(instructions) == "" {
		return badRequest("config.instructions", "a skill needs config.instructions, the text an agent reads when it loads the skill")
	}
	if len(instructions) > MaxSkillInstructions {
		return badRequest("config.instructions", "the instructions are %d bytes; at most %d are allowed", len(instructions), MaxSkillInstructions)
	}
	raw, present := config["examples"]
	if !present || raw == nil {
		return nil
	}
	list, ok := raw.([]any)
	if !ok {
		return badRequest("config.examples", "examples must be a list of {situation, resolution, reason}")
	}
	if len(list) > MaxSkillExamples {
		return badRequest("config.examples", "%d examples; at most %d are allowed", len(list), MaxSkillExamples)
	}
	for i, item := range list {
		path := fmt.Sprintf("config.examples[%d]", i)
		example, ok := item.(map[string]any)
		if !ok {
			return badRequest(path, "an example is an object {situation, resolution, reason}")
		}
		if err := onlyKeys(example, "situation", "resolution", "reason"); err != nil {
			return badRequest(path, "%s", strings.TrimPrefix(err.Error(), "config."))
		}
		for _, field := range []string{"situation", "resolution", "reason"} {
			text, ok := example[field].(string)
			if !ok || strings.TrimSpace(text) == "" {
				return badRequest(path+"."+field, "an example needs its %s as text", field)
			}
			if n := utf8.RuneCountInString(text); n > MaxSkillExampleText {
				return badRequest(path+"."+field, "the %s has %d characters; at most %d are allowed", field, n, MaxSkillExampleText)
			}
		}
	}
	return nil
}
