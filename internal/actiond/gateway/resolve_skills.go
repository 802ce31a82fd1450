package gateway

import (
	"context"
	"fmt"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/skill"
)

// skills resolves each skill reference at its pinned or latest version and
// renders it beside the server's offered tools. A skill whose action or
// version is disabled or deleted, or whose description no longer meets the
// Agent Skills rules, is left out (ACT-252..254).
func (d *directory) skills(ctx context.Context, resolver action.Resolver, server action.Definition, tools []*Tool) ([]*Skill, error) {
	var offered []skill.Tool
	for _, t := range tools {
		if t.Unavailable == nil {
			offered = append(offered, skill.Tool{Ref: t.Target.Definition.Name, Name: t.Name, Description: t.Description})
		}
	}
	var out []*Skill
	for _, ref := range server.Skills {
		target, ok, err := action.ResolveSkill(ctx, resolver, ref)
		if err != nil {
			return nil, fmt.Errorf("resolve skill %q: %w", ref.Name, err)
		}
		if !ok {
			continue
		}
		latest := target
		if ref.Version != nil && *ref.Version != 0 {
			// The latest version's description decides, also for a pin.
			if latest, err = resolver.Resolve(ctx, ref.Name, 0); err != nil {
				return nil, fmt.Errorf("resolve skill %q: %w", ref.Name, err)
			}
		}
		if !action.SkillDescribed(target.Definition) || !action.SkillDescribed(latest.Definition) {
			continue
		}
		out = append(out, &Skill{Name: target.Definition.Name, Target: target, File: skill.Render(target.Definition, target.Version, offered)})
	}
	return out, nil
}

// templates resolves mcp.resources against the server's tools. A template
// whose tool is not offered, or whose tool's current version can write by
// the derived rule, is unavailable (ACT-277).
func templates(server action.Definition, tools []*Tool) []*Template {
	if server.MCP == nil {
		return nil
	}
	var out []*Template
	for _, spec := range server.MCP.Resources {
		parsed, err := action.ParseURITemplate(spec.URITemplate)
		if err != nil {
			continue // validated at write; an unreadable one is never served
		}
		t := &Template{Spec: spec, Parsed: parsed, Unavailable: true}
		for _, tool := range tools {
			if tool.Name != spec.Tool || tool.Unavailable != nil {
				continue
			}
			t.Tool = tool
			t.Unavailable = tool.Annotations == nil || !tool.Annotations.ReadOnlyHint
			t.MIMEType = outputMIMEType(tool)
			break
		}
		out = append(out, t)
	}
	return out
}

// outputMIMEType is what a tool's output schema fixes: text/plain for a
// string, application/json for any other single type, nothing otherwise.
func outputMIMEType(tool *Tool) string {
	var schema map[string]any
	if tool.Target.Native {
		schema = tool.OutputSchema
	} else if block := tool.Target.Definition.Tool; block != nil {
		schema = block.OutputSchema
	}
	switch kind, _ := schema["type"].(string); kind {
	case "":
		return ""
	case "string":
		return "text/plain"
	default:
		return "application/json"
	}
}
