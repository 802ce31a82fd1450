package mcpserver

import (
	"context"
	"fmt"
	"strings"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/build"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/template"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// ListTemplatesArgs: list_templates takes no arguments.
type ListTemplatesArgs struct{}

// ListTemplatesResult is list_templates' structured result.
type ListTemplatesResult struct {
	Templates          []TemplateView `json:"templates" jsonschema:"every template mcp.yaml approves, in its order; only usable ones can be used"`
	MaxInstances       int            `json:"max_instances" jsonschema:"mcp.yaml max-instances: MCP instances per host user, across sessions"`
	MaxConcurrentTasks int            `json:"max_concurrent_tasks" jsonschema:"mcp.yaml max-concurrent-tasks: running background tasks and delegates per host user, across sessions"`
	OrphanGraceHours   int            `json:"orphan_grace_hours" jsonschema:"mcp.yaml orphan-grace-hours: how long an instance outlives its session before a later isx mcp destroys it"`
}

// TemplateView is one approved template.
type TemplateView struct {
	Template             string          `json:"template"`
	Description          string          `json:"description,omitempty"`
	Source               string          `json:"source,omitempty" jsonschema:"where the definition comes from: builtin, user, search-path (project-local ones are never usable)"`
	Usable               bool            `json:"usable" jsonschema:"create_instance may use it now: approved, trusted and built"`
	Built                bool            `json:"built"`
	Stale                bool            `json:"stale" jsonschema:"built from an older definition; still usable, the user may rebuild it"`
	Reason               string          `json:"reason,omitempty" jsonschema:"why it is not usable or is stale"`
	Tools                []ToolView      `json:"tools" jsonschema:"agent tools the template installs"`
	DefaultDelegateAgent string          `json:"default_delegate_agent" jsonschema:"the agent a delegate gets when it names none: claude when installed, else codex; empty when the template has neither (then delegate must name its agent)"`
	SupportsAsk          bool            `json:"supports_ask" jsonschema:"whether ask (a summary by a model inside the instance) can work here"`
	SummaryAgent         string          `json:"summary_agent" jsonschema:"the agent that answers ask; empty when ask cannot work here"`
	DelegateAgents       []DelegateAgent `json:"delegate_agents" jsonschema:"one descriptor per installed agent"`
}

// ToolView is an agent tool of a template.
type ToolView struct {
	Name  string `json:"name"`
	Model string `json:"model,omitempty"`
}

// DelegateAgent describes an installed agent a delegate could run.
type DelegateAgent struct {
	Agent                  string `json:"agent" jsonschema:"claude, codex, pi or opencode"`
	Model                  string `json:"model,omitempty" jsonschema:"the template's configured model"`
	SupportsModelPreflight bool   `json:"supports_model_preflight" jsonschema:"whether a chosen model is checked against the account before launch (Claude only)"`
	PermissionMode         string `json:"permission_mode,omitempty" jsonschema:"Claude's permission mode or Codex's sandbox mode from mcp.yaml; absent when mcp.yaml must first name a Codex sandbox mode for this template"`
	ApprovalPolicy         string `json:"approval_policy,omitempty" jsonschema:"Codex's approval policy: always never"`
}

var listTemplatesTool = newTool[ListTemplatesArgs, ListTemplatesResult](mcpkit.Spec{
	Name: "list_templates", Annotations: readOnly(),
	Description: "List the templates the user approved for agents in mcp.yaml, whether each is usable (approved, trusted, built), its agent tools and delegate agents, and the limits max_instances, max_concurrent_tasks and orphan_grace_hours.",
})

func (s *Server) addTemplateTools() {
	addTool(s, listTemplatesTool, s.listTemplates)
}

func (s *Server) listTemplates(ctx context.Context, c *call, _ ListTemplatesArgs) (ListTemplatesResult, string, error) {
	out := ListTemplatesResult{
		Templates:          []TemplateView{},
		MaxInstances:       c.policy.MaxInstances,
		MaxConcurrentTasks: c.policy.MaxConcurrentTasks,
		OrphanGraceHours:   c.policy.OrphanGraceHours,
	}
	if len(c.policy.Templates) > 0 {
		set, err := s.opts.Templates()
		if err != nil {
			return out, "", err
		}
		bases, err := s.opts.Client.InstancesByName(ctx)
		if err != nil {
			return out, "", err
		}
		for _, name := range c.policy.Templates {
			out.Templates = append(out.Templates, describeTemplate(c.policy, set, bases[name], name))
		}
	}
	return out, templatesText(c.policy, out), nil
}

func describeTemplate(policy *config.MCP, set *template.Set, built *incus.Instance, name string) TemplateView {
	view := TemplateView{Template: name, Tools: []ToolView{}, DelegateAgents: []DelegateAgent{}}
	def, err := set.Get(name)
	if err != nil {
		view.Reason = fmt.Sprintf("no template named %s is defined; the user may have removed or renamed it", name)
		return view
	}
	view.Description, view.Source = def.Description, string(def.Source.Kind)
	tools := chainTools(set, name)
	for _, t := range tools {
		view.Tools = append(view.Tools, ToolView{Name: t.Name, Model: t.Model})
	}
	describeDelegates(&view, policy, name, installedTools(built))
	if refusal := usable(set, built, name); refusal != nil {
		view.Reason = refusal.Message
	}
	status, err := build.StatusOf(built, set, name)
	if err == nil {
		view.Built, view.Stale = status.Built, status.Stale
		if view.Reason == "" && status.Stale {
			view.Reason = status.Reason
		}
	}
	view.Usable = view.Built && usable(set, built, name) == nil
	return view
}

// usable checks that an approved template may be branched from: it is
// trusted all the way down, built, and its build is not from a
// project-local definition. Whether mcp.yaml approves it is checked by
// the caller.
func usable(set *template.Set, built *incus.Instance, name string) *coded.Error {
	if err := set.Approvable(name); err != nil {
		r := refusalOf(err)
		r.Code = CodeNotApproved
		return r
	}
	status, err := build.StatusOf(built, set, name)
	if err != nil {
		return refusef(CodeNotApproved, "template %s cannot be checked: %v", name, err)
	}
	if !status.Built {
		return refusef(CodeNotApproved, "template %s is approved but not built; ask the user to run `isx build %s`", name, name)
	}
	if instance.ParseStamps(built.Config).Source == string(template.SourceProjectLocal) {
		return refusef(CodeNotApproved, "the built %s was made from a project-local definition (.incus-spawn/), which can never be used through MCP; ask the user to rebuild it with `isx build %s` from a trusted definition", name, name)
	}
	return nil
}

// chainTools are the agent tools of the template's chain (none when the
// chain cannot be read; usable says why).
func chainTools(set *template.Set, name string) []template.Tool {
	chain, err := set.Chain(name)
	if err != nil {
		return nil
	}
	return template.MergeTools(chain)
}

// installedTools are the agents a built template has: its build installed
// every tool its chain names, or failed. Until it is built there are none.
func installedTools(built *incus.Instance) []template.Tool {
	if built == nil {
		return nil
	}
	stamped, err := instance.ParseStamps(built.Config).Tools()
	if err != nil {
		return nil
	}
	tools := make([]template.Tool, 0, len(stamped))
	for _, t := range stamped {
		tools = append(tools, template.Tool{Name: t.Name, Model: t.Model, Workdir: t.Workdir})
	}
	return tools
}

// describeDelegates fills the delegate fields of seed 000: a descriptor
// per installed agent, the default agent, and whether ask works.
func describeDelegates(view *TemplateView, policy *config.MCP, name string, tools []template.Tool) {
	has := map[string]bool{}
	for _, t := range tools {
		has[t.Name] = true
		agent := DelegateAgent{Agent: t.Name, Model: t.Model, SupportsModelPreflight: t.Name == template.ToolClaude}
		switch t.Name {
		case template.ToolClaude:
			agent.PermissionMode = policy.ClaudePermissionMode(name)
		case template.ToolCodex:
			agent.ApprovalPolicy = "never"
			// Without a sandbox mode that applies, mcp.yaml must name one
			// before Codex can run here; the mode is then left out.
			if mode, err := policy.CodexSandboxMode(name); err == nil {
				agent.PermissionMode = mode
			}
		default:
			agent.PermissionMode = "full-access"
		}
		view.DelegateAgents = append(view.DelegateAgents, agent)
	}
	switch {
	case has[template.ToolClaude]:
		view.DefaultDelegateAgent = template.ToolClaude
	case has[template.ToolCodex]:
		view.DefaultDelegateAgent = template.ToolCodex
	}
	if has[template.ToolClaude] {
		view.SupportsAsk, view.SummaryAgent = true, template.ToolClaude
	}
}

func templatesText(policy *config.MCP, out ListTemplatesResult) string {
	var b strings.Builder
	if len(out.Templates) == 0 {
		fmt.Fprintf(&b, "No template is approved for agents. The user approves templates in %s (templates: [...]) or with isx init.\n", policy.Path)
	}
	for _, t := range out.Templates {
		state := "usable"
		if !t.Usable {
			state = "not usable: " + t.Reason
		} else if t.Stale {
			state = "usable (stale: " + t.Reason + ")"
		}
		names := make([]string, 0, len(t.Tools))
		for _, tool := range t.Tools {
			names = append(names, tool.Name)
		}
		tools := "no agent tools"
		if len(names) > 0 {
			tools = "tools: " + strings.Join(names, ", ")
		}
		fmt.Fprintf(&b, "- %s: %s; %s", t.Template, state, tools)
		if t.Description != "" {
			fmt.Fprintf(&b, " — %s", t.Description)
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "Limits: max_instances %d, max_concurrent_tasks %d, orphan_grace_hours %d.", out.MaxInstances, out.MaxConcurrentTasks, out.OrphanGraceHours)
	return b.String()
}
