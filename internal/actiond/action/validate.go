package action

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
	"go.starlark.net/syntax"

	"github.com/incusspawn/isx/internal/actiond/policy"
)

// Limits of a definition.
const (
	MaxTools                = 128
	MaxSkills               = 64
	MaxNameLength           = 128
	MaxSkillNameLength      = 64
	MaxSkillDescription     = 1024
	maxFixedInputProperties = 64
)

var (
	actionName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)
	skillName  = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
)

// Validate checks a definition write (createAction's input, or updateAction's
// merged by Update) against every rule of seed 004. resolver reads the
// referenced actions at the versions the write names (latest when unpinned);
// writer is the principal making the write, who must be allowed to SELECT
// and INVOKE every referenced tool and skill. The first rule broken is
// returned as an *Error with its field path and code (BAD_REQUEST,
// NOT_FOUND or ACCESS_DENIED); a resolver failure other than ErrNotFound is
// returned wrapped, as an internal error.
func Validate(ctx context.Context, def Definition, resolver Resolver, writer Writer) error {
	if resolver == nil || writer == nil {
		return errors.New("action: Validate needs a resolver and a writer")
	}
	v := &validation{ctx: ctx, def: def, resolver: resolver, writer: writer}
	for _, step := range []func() error{
		v.identity,
		v.structure,
		v.config,
		v.policies,
		v.execution,
		v.agentBlock,
		v.serverBlock,
		v.compile,
		v.tools,
		v.skills,
		v.resources,
	} {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

type validation struct {
	ctx      context.Context
	def      Definition
	resolver Resolver
	writer   Writer
	compiled *Compiled
	targets  []Target // per def.Tools
}

func (v *validation) isServer() bool { return v.def.Kind == KindMCP }

func (v *validation) identity() error {
	def := v.def
	if def.Kind == "" {
		return badRequest("kind", "kind is required: one of cel, graphql, tool, mcp, agent, skill, model")
	}
	if !slices.Contains(kinds, def.Kind) {
		return badRequest("kind", "unknown kind %q: use one of cel, graphql, tool, mcp, agent, skill, model", def.Kind)
	}
	if def.Name == "" {
		return badRequest("name", "name is required")
	}
	if len(def.Name) > MaxNameLength || !actionName.MatchString(def.Name) {
		return badRequest("name", "name %q must be 1 to %d letters, digits, _, . and -, starting with a letter, digit or _", def.Name, MaxNameLength)
	}
	switch def.Kind {
	case KindSkill:
		if err := checkSkillIdentity("name", "description", def.Name, def.Description); err != nil {
			return err
		}
	case KindCEL, KindGraphQL, KindTool, KindAgent, KindModel:
		if IsNative(def.Name) {
			return badRequest("name", "%q is the name of a native tool; a reference to it would never reach this action, so choose another name", def.Name)
		}
	}
	return nil
}

// checkSkillIdentity applies the Agent Skills rules (ACT-032..035).
func checkSkillIdentity(namePath, descriptionPath, name, description string) error {
	if len(name) > MaxSkillNameLength || !skillName.MatchString(name) {
		return badRequest(namePath, "skill name %q must be lowercase letters and digits in words joined by single hyphens, at most %d characters", name, MaxSkillNameLength)
	}
	if strings.TrimSpace(description) == "" {
		return badRequest(descriptionPath, "skill %q needs a description", name)
	}
	if n := utf8.RuneCountInString(description); n > MaxSkillDescription {
		return badRequest(descriptionPath, "skill %q has a description of %d characters; at most %d are allowed", name, n, MaxSkillDescription)
	}
	return nil
}

func (v *validation) structure() error {
	def := v.def
	if v.isServer() {
		switch {
		case def.MCP == nil:
			return badRequest("mcp", "an action of kind mcp needs an mcp block")
		case def.Session == nil:
			return badRequest("session", "an action of kind mcp needs a session block, with inputSchema and id")
		case len(def.Triggers) > 0:
			return badRequest("triggers", "an MCP server has no triggers: it runs only when its endpoint serves a request")
		case def.Tool != nil:
			return badRequest("tool", "an MCP server has no tool block: it is not called as a tool")
		case def.Agent != nil:
			return badRequest("agent", "an MCP server has no agent block")
		}
	} else if def.MCP != nil {
		return badRequest("mcp", "only an action of kind mcp has an mcp block")
	}
	if def.Agent != nil && def.Kind != KindAgent {
		return badRequest("agent", "only an action of kind agent has an agent block")
	}
	switch def.Kind {
	case KindCEL, KindGraphQL, KindTool:
		if def.Tool == nil {
			return badRequest("tool", "an action of kind %s needs a tool block with its inputSchema", def.Kind)
		}
	case KindSkill:
		if def.Tool != nil {
			return badRequest("tool", "a skill has no tool block: it is loaded, not called")
		}
	}
	return nil
}

func (v *validation) config() error {
	config := v.def.Config
	switch v.def.Kind {
	case KindMCP:
		if len(config) > 0 {
			return badRequest("config", "an MCP server's config is {}")
		}
	case KindCEL:
		if err := onlyKeys(config, "expression"); err != nil {
			return err
		}
		if s, ok := config["expression"].(string); !ok || strings.TrimSpace(s) == "" {
			return badRequest("config.expression", "a cel action needs config.expression, a CEL expression over event.data")
		}
	case KindGraphQL:
		return checkGraphQLConfig(config)
	case KindTool:
		return checkStarlarkConfig(config)
	}
	return nil
}

func onlyKeys(config map[string]any, allowed ...string) error {
	keys := slices.Sorted(maps.Keys(config))
	for _, key := range keys {
		if !slices.Contains(allowed, key) {
			return badRequest("config."+key, "unknown config field %q: the config takes %s", key, strings.Join(allowed, ", "))
		}
	}
	return nil
}

func checkGraphQLConfig(config map[string]any) error {
	if err := onlyKeys(config, "document", "operationName", "variables"); err != nil {
		return err
	}
	document, ok := config["document"].(string)
	if !ok || strings.TrimSpace(document) == "" {
		return badRequest("config.document", "a graphql action needs config.document, a GraphQL operation")
	}
	parsed, err := parser.ParseQuery(&ast.Source{Name: "document", Input: document})
	if err != nil {
		return badRequest("config.document", "the document does not parse: %v", err)
	}
	if len(parsed.Operations) == 0 {
		return badRequest("config.document", "the document has no operation")
	}
	name, named := config["operationName"]
	if named {
		operation, ok := name.(string)
		if !ok || parsed.Operations.ForName(operation) == nil {
			return badRequest("config.operationName", "the document has no operation named %v", name)
		}
	} else if len(parsed.Operations) > 1 {
		return badRequest("config.operationName", "the document has %d operations: name the one to run", len(parsed.Operations))
	}
	if variables, ok := config["variables"]; ok && variables != nil {
		if _, ok := variables.(map[string]any); !ok {
			return badRequest("config.variables", "variables must be an object")
		}
	}
	return nil
}

func checkStarlarkConfig(config map[string]any) error {
	if err := onlyKeys(config, "source"); err != nil {
		return err
	}
	source, ok := config["source"].(string)
	if !ok || strings.TrimSpace(source) == "" {
		return badRequest("config.source", "a tool action needs config.source, a Starlark program defining run(event)")
	}
	file, err := (&syntax.FileOptions{Set: true, While: true, TopLevelControl: true, GlobalReassign: true, Recursion: true}).Parse("tool.star", source, 0)
	if err != nil {
		return badRequest("config.source", "the program does not parse: %v", err)
	}
	for _, stmt := range file.Stmts {
		if def, ok := stmt.(*syntax.DefStmt); ok && def.Name.Name == "run" {
			return nil
		}
	}
	return badRequest("config.source", "the program must define run(event)")
}

func (v *validation) policies() error {
	err := policy.Validate(v.def.Policies)
	var invalid *policy.InvalidError
	if errors.As(err, &invalid) {
		return newError(CodeBadRequest, "policies"+invalid.Path(), invalid.Message, err)
	}
	return err
}

func (v *validation) execution() error {
	if v.def.Execution == nil {
		return nil
	}
	if retries := v.def.Execution.Retries; retries != nil {
		if *retries < 0 || *retries > MaxRetries {
			return badRequest("execution.retries", "retries must be 0 to %d", MaxRetries)
		}
		if !v.def.IsCallableAgent() {
			return badRequest("execution.retries", "only a callable agent runs as a started execution that can be retried")
		}
	}
	if v.def.Execution.ResponseTimeout == "" {
		return nil
	}
	timeout, err := ParseDuration(v.def.Execution.ResponseTimeout)
	if err != nil {
		return wrapped(CodeBadRequest, "execution.responseTimeout", err)
	}
	if timeout <= 0 {
		return badRequest("execution.responseTimeout", "the response timeout must be positive")
	}
	if v.isServer() && timeout > MaxResponseTimeout {
		return badRequest("execution.responseTimeout", "an MCP server's response timeout is at most 10 minutes, not %s", timeout)
	}
	return nil
}

// agentBlock checks what a callable agent runs: its instructions and model.
// Whether its provider is configured is known only where it runs: an agent
// whose provider is missing there fails with model_unavailable.
func (v *validation) agentBlock() error {
	if !v.def.IsCallableAgent() {
		return nil
	}
	_, err := v.def.AgentSettings()
	return err
}

func (v *validation) serverBlock() error {
	if !v.isServer() {
		return nil
	}
	block := v.def.MCP
	if strings.TrimSpace(block.Name) == "" {
		return badRequest("mcp.name", "the mcp block needs name (a supplied mcp block replaces the whole block, so send all of it)")
	}
	if block.Session == nil || block.Session.Start == nil {
		return badRequest("mcp.session", "the mcp block needs session.start.input, which maps the request to the session's input (a supplied mcp block replaces the whole block, so send all of it)")
	}
	switch block.Mode {
	case "", ModePreview, ModeLive:
	default:
		return badRequest("mcp.mode", "mode %q must be PREVIEW or LIVE", block.Mode)
	}
	switch block.Intent {
	case "", IntentRequired, IntentOptional, IntentNone:
	default:
		return badRequest("mcp.intent", "intent %q must be REQUIRED, OPTIONAL or NONE", block.Intent)
	}
	if block.Limits != nil && block.Limits.CallsPerMinute < 1 {
		return badRequest("mcp.limits.callsPerMinute", "callsPerMinute must be at least 1")
	}
	for i, template := range block.Resources {
		path := fmt.Sprintf("mcp.resources[%d]", i)
		if _, err := ParseURITemplate(template.URITemplate); err != nil {
			return wrapped(CodeBadRequest, path+".uriTemplate", err)
		}
		if strings.TrimSpace(template.Name) == "" {
			return badRequest(path+".name", "a resource template needs a name")
		}
		if template.Tool == "" {
			return badRequest(path+".tool", "a resource template names the tool that reads it")
		}
	}
	return nil
}

// compile compiles every expression and schema, then checks what needs the
// compiled session id.
func (v *validation) compile() error {
	compiled, err := Compile(v.def)
	if err != nil {
		return err
	}
	v.compiled = compiled
	if v.isServer() {
		return v.sessionCoversStart()
	}
	return nil
}

// sessionCoversStart: session.id may read only the fields
// mcp.session.start.input maps, or every request would be refused as
// mismatched; and every field session.inputSchema requires must be
// produced by start.input. A start.input field the id does not read is
// accepted, as the seed's own example of a later version shows: the
// sessions whose input it changes are refused with mcp_session_invalid
// until they are closed.
func (v *validation) sessionCoversStart() error {
	start := v.def.MCP.Session.Start.Input
	fields, whole := v.compiled.sessionID.Fields("session", "input")
	if !whole {
		for _, name := range slices.Sorted(slices.Values(fields)) {
			if _, ok := start[name]; !ok {
				return badRequest("session.id", "session.id reads session.input.%s, which mcp.session.start.input does not map: every request would be refused as mismatched; map %s in start.input or stop reading it", name, name)
			}
		}
	}
	for _, name := range requiredNames(v.def.Session.InputSchema) {
		if _, ok := start[name]; !ok {
			return badRequest("mcp.session.start.input", "session.inputSchema requires %q, which start.input does not produce: every request would be refused", name)
		}
	}
	return nil
}

func (v *validation) tools() error {
	refs := v.def.Tools
	if len(refs) > MaxTools {
		return badRequest("tools", "%d tools listed; at most %d are allowed", len(refs), MaxTools)
	}
	seen := map[string]int{}
	v.targets = make([]Target, len(refs))
	for i, ref := range refs {
		path := fmt.Sprintf("tools[%d]", i)
		target, err := v.tool(path, ref)
		if err != nil {
			return err
		}
		v.targets[i] = target
		name := VisibleName(target)
		if first, ok := seen[name]; ok {
			return badRequest(path+".name", "tools[%d] already offers a tool named %q at the versions read: tool names must be distinct", first, name)
		}
		seen[name] = i
	}
	return nil
}

func (v *validation) tool(path string, ref ToolRef) (Target, error) {
	if ref.Name == "" {
		return Target{}, badRequest(path+".name", "a tool reference needs the name of a tool")
	}
	if ref.Version != nil && *ref.Version < 1 {
		return Target{}, badRequest(path+".version", "a version is a number from 1")
	}
	if len(ref.Input) > maxFixedInputProperties {
		return Target{}, badRequest(path+".input", "at most %d fixed-input properties", maxFixedInputProperties)
	}
	if ref.Approval != nil && ref.Approval.Required && v.isServer() {
		return Target{}, badRequest(path+".approval.required", "an MCP server's tool cannot require approval: nobody can approve a call an external agent makes")
	}
	if IsNative(ref.Name) {
		if MCPOnly(ref.Name) && !v.isServer() {
			return Target{}, badRequest(path+".name", "only an MCP server can list the native tool %s", ref.Name)
		}
		if ref.Version != nil {
			return Target{}, badRequest(path+".version", "the native tool %s has no versions", ref.Name)
		}
		return ResolveTool(v.ctx, v.resolver, ref.Name, 0)
	}
	target, err := v.reach(path, "tool", ref.Name, versionOf(ref.Version))
	if err != nil {
		return Target{}, err
	}
	if !Callable(target) {
		reason := fmt.Sprintf("it is of kind %s", target.Definition.Kind)
		if target.Definition.Kind == KindAgent {
			reason = "it is an agent without a tool block"
		}
		return Target{}, badRequest(path+".name", "%s cannot be listed as a tool: %s", ref.Name, reason)
	}
	schema := InputSchema(target)
	if v.isServer() && v.def.ServerIntent() != IntentNone && DeclaresIntent(schema) {
		return Target{}, badRequest(path+".name", "%s declares its own intent property, which this server's stated intent would take: pin a version without it, rename the property, or set mcp.intent to NONE", ref.Name)
	}
	if err := fixedInputFits(path, ref, schema); err != nil {
		return Target{}, err
	}
	return target, nil
}

// fixedInputFits refuses fixed input for a property the tool's schema
// forbids, which would make every call fail.
func fixedInputFits(path string, ref ToolRef, schema map[string]any) error {
	if schema == nil || schema["additionalProperties"] != false {
		return nil
	}
	properties, _ := schema[propertiesKeyword].(map[string]any)
	names := slices.Sorted(maps.Keys(ref.Input))
	for _, name := range names {
		if _, ok := properties[name]; !ok {
			return badRequest(path+".input."+name, "%s's input schema has no property %q and allows no others", ref.Name, name)
		}
	}
	return nil
}

// reach resolves a referenced action and checks the writer may read and
// invoke it. An action the writer may not read is reported as missing.
func (v *validation) reach(path, what, name string, version int) (Target, error) {
	at := ""
	if version > 0 {
		at = fmt.Sprintf(" at version %d", version)
	}
	notFound := newError(CodeNotFound, path+".name", fmt.Sprintf("no %s named %q%s that you can read", what, name, at), nil)
	target, err := v.resolver.Resolve(v.ctx, name, version)
	if errors.Is(err, ErrNotFound) {
		notFound.Err = err
		return Target{}, notFound
	}
	if err != nil {
		return Target{}, fmt.Errorf("action: resolving %s %q: %w", what, name, err)
	}
	if target.Deleted {
		return Target{}, notFound
	}
	document := Document(target)
	if err := v.writer.Check(v.ctx, policy.Request{Operation: policy.Select, Resource: ResourceAction, Document: document}); err != nil {
		notFound.Err = err
		return Target{}, notFound
	}
	if err := v.writer.Check(v.ctx, policy.Request{Operation: policy.Invoke, Resource: ResourceAction, Document: document}); err != nil {
		return Target{}, newError(CodeAccessDenied, path+".name", fmt.Sprintf("you may not INVOKE %s %q, so you cannot reference it: %v", what, name, err), err)
	}
	return target, nil
}

func (v *validation) skills() error {
	refs := v.def.Skills
	if len(refs) > MaxSkills {
		return badRequest("skills", "%d skills listed; at most %d are allowed", len(refs), MaxSkills)
	}
	seen := map[string]int{}
	for i, ref := range refs {
		path := fmt.Sprintf("skills[%d]", i)
		if ref.Name == "" {
			return badRequest(path+".name", "a skill reference needs the name of a skill")
		}
		if ref.Version != nil && *ref.Version < 1 {
			return badRequest(path+".version", "a version is a number from 1")
		}
		if ref.Preload != nil && v.isServer() {
			return badRequest(path+".preload", "an MCP server's skills have no preload: the host decides what to load")
		}
		target, err := v.reach(path, "skill", ref.Name, versionOf(ref.Version))
		if err != nil {
			return err
		}
		if target.Definition.Kind != KindSkill {
			return badRequest(path+".name", "%s is of kind %s, not a skill", ref.Name, target.Definition.Kind)
		}
		if err := checkSkillIdentity(path+".name", path+".name", target.Definition.Name, target.Definition.Description); err != nil {
			return err
		}
		if first, ok := seen[target.Definition.Name]; ok {
			return badRequest(path+".name", "skills[%d] already references the skill %q", first, target.Definition.Name)
		}
		seen[target.Definition.Name] = i
	}
	return nil
}

// resources: a template's tool is one of the server's tools (ACT-258) and
// read-only by the derived rule (ACT-276).
func (v *validation) resources() error {
	if !v.isServer() {
		return nil
	}
	for i, template := range v.def.MCP.Resources {
		path := fmt.Sprintf("mcp.resources[%d].tool", i)
		index := slices.IndexFunc(v.targets, func(t Target) bool { return VisibleName(t) == template.Tool })
		if index < 0 {
			return badRequest(path, "%q is not one of this server's tools", template.Tool)
		}
		target := v.targets[index]
		if !Annotations(v.def, target, false).ReadOnlyHint {
			return badRequest(path, "%q can write: a host reads resources without asking anyone, so a template's tool must be read-only (SELECT-only policies on the server or the tool)", template.Tool)
		}
	}
	return nil
}
