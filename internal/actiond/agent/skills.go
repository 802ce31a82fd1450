package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/incusspawn/isx/internal/actiond/store"
)

// loadSkillName is the tool a model loads a skill with that the agent names
// but does not preload: the system prompt carries only its description, and
// the instructions cost tokens only once the model asks for them.
const loadSkillName = "load_skill"

// skillLoader is the load_skill tool for the skills the agent does not
// preload, named apart from the agent's own tools; ok is false when every
// skill is preloaded.
func skillLoader(skills []skill, tools []tool) (spec ToolSpec, ok bool) {
	var names []string
	for _, sk := range skills {
		if !sk.preload {
			names = append(names, sk.target.Definition.Name)
		}
	}
	if len(names) == 0 {
		return ToolSpec{}, false
	}
	taken := func(name string) bool {
		return slices.ContainsFunc(tools, func(t tool) bool { return t.spec.Name == name })
	}
	name := loadSkillName
	for n := 2; taken(name); n++ {
		name = fmt.Sprintf("%s_%d", loadSkillName, n)
	}
	return ToolSpec{
		Name:        name,
		Description: "Load one of your skills: answers with its instructions. Load a skill when its description says it applies.",
		InputSchema: map[string]any{
			"type":                 "object",
			"properties":           map[string]any{"name": map[string]any{"type": "string", "enum": names}},
			"required":             []string{"name"},
			"additionalProperties": false,
		},
	}, true
}

// loadSkill answers a load_skill call with the skill's instructions and
// records the load beneath the task, as a preload is recorded.
func (x *run) loadSkill(ctx context.Context, use Block) (Block, Result, bool) {
	result := func(content string, isError bool) Block {
		return Block{Type: BlockToolResult, ToolUseID: use.ID, Content: content, IsError: isError}
	}
	var args struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(use.Input, &args); err != nil {
		return result("The input must be a JSON object naming the skill: {\"name\": ...}.", true), Result{}, false
	}
	i := slices.IndexFunc(x.skills, func(sk skill) bool { return !sk.preload && sk.target.Definition.Name == args.Name })
	if i < 0 {
		return result(fmt.Sprintf("There is no skill named %q to load: name one of those the tool lists.", args.Name), true), Result{}, false
	}
	sk := x.skills[i]
	if err := x.attempt.Record(ctx, []*store.Execution{x.loadRecord(sk)}); err != nil {
		return Block{}, Result{Interrupted: true, Err: err}, true
	}
	instructions, _ := sk.target.Definition.Config["instructions"].(string)
	return result("## Skill "+sk.target.Definition.Name+"\n\n"+instructions, false), Result{}, false
}

// loadRecord is the execution recording one load of a skill's version
// beneath the task.
func (x *run) loadRecord(sk skill) *store.Execution {
	now := x.r.Clock.Now()
	e := &store.Execution{
		ID: x.r.IDs.New(), Account: x.spec.Account, ActionID: sk.target.ID, ActionVersion: int64(sk.target.Version),
		ActionName: sk.target.Definition.Name, EventType: "skill.load", Role: store.RoleCall, ParentID: x.attempt.TaskID,
		Status: store.Succeeded, Caller: x.spec.Who.Principal, Subject: x.spec.Who.Subject, Client: x.spec.Who.Client,
		Preview: x.spec.Preview, StartedAt: now, EndedAt: now,
	}
	e.Output, _ = json.Marshal(map[string]any{"name": sk.target.Definition.Name, "version": sk.target.Version}) // a map of a string and an int always encodes
	return e
}
