package action

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/incusspawn/isx/internal/actiond/expr"
	"github.com/incusspawn/isx/internal/mcpkit/anyschema"
)

// The CEL environments of a definition's expressions.
var (
	// Fixed input of an MCP server's references reads the request and the
	// session, never event (ACT-024..027).
	serverFixedEnv = expr.MustNewEnv(expr.Variables("execution", "session"))
	// Fixed input of other actions' references may also read the event that
	// triggered them.
	fixedEnv = expr.MustNewEnv(expr.Variables("event", "execution", "session"))
	// mcp.session.start.input maps the request to the session's input.
	sessionStartEnv = expr.MustNewEnv(expr.Variables("execution"))
	// session.id names the session from its input.
	sessionIDEnv = expr.MustNewEnv(expr.Variables("session"))
	// A cel action's expression reads its input as event.data, as a
	// Starlark tool's run(event) does.
	celToolEnv = expr.MustNewEnv(expr.Variables("event"))
)

// CELToolVariables are the variables a kind cel action's config.expression
// may read: event, whose data is the call's input.
var CELToolVariables = []string{"event"}

// Compiled is a definition with its expressions and schemas compiled. It is
// immutable and safe for concurrent use; keep one per action version (Cache).
type Compiled struct {
	definition    Definition
	fixed         [][]field // per tools[i]
	start         []field
	sessionID     *expr.Program
	sessionSchema *anyschema.Validator
	inputSchema   *anyschema.Validator
	outputSchema  *anyschema.Validator
	expression    *expr.Program
}

type field struct {
	name    string
	program *expr.Program
}

// Compile compiles every expression and schema of def. Its errors are
// *Error values naming the field; the CEL ones wrap the *expr.Error.
func Compile(def Definition) (*Compiled, error) {
	c := &Compiled{definition: def, fixed: make([][]field, len(def.Tools))}
	env := fixedEnv
	if def.Kind == KindMCP {
		env = serverFixedEnv
	}
	for i, ref := range def.Tools {
		fields, err := compileFields(env, fmt.Sprintf("tools[%d].input", i), ref.Input)
		if err != nil {
			return nil, err
		}
		c.fixed[i] = fields
	}
	if def.MCP != nil && def.MCP.Session != nil && def.MCP.Session.Start != nil {
		fields, err := compileFields(sessionStartEnv, "mcp.session.start.input", def.MCP.Session.Start.Input)
		if err != nil {
			return nil, err
		}
		c.start = fields
	}
	if err := c.compileSession(); err != nil {
		return nil, err
	}
	if err := c.compileToolBlock(); err != nil {
		return nil, err
	}
	if def.Kind == KindCEL {
		source, _ := def.Config["expression"].(string)
		program, err := celToolEnv.Compile(source)
		if err != nil {
			return nil, wrapped(CodeBadRequest, "config.expression", err)
		}
		c.expression = program
	}
	return c, nil
}

func compileFields(env *expr.Env, path string, sources map[string]string) ([]field, error) {
	names := slices.Sorted(maps.Keys(sources))
	fields := make([]field, 0, len(names))
	for _, name := range names {
		if strings.TrimSpace(name) == "" {
			return nil, badRequest(path, "a field needs a name")
		}
		program, err := env.Compile(sources[name])
		if err != nil {
			return nil, wrapped(CodeBadRequest, path+"."+name, err)
		}
		fields = append(fields, field{name: name, program: program})
	}
	return fields, nil
}

func (c *Compiled) compileSession() error {
	session := c.definition.Session
	if session == nil {
		return nil
	}
	if strings.TrimSpace(session.ID) == "" {
		return badRequest("session.id", "the session needs an id: a CEL expression over session.input naming the session")
	}
	program, err := sessionIDEnv.Compile(session.ID)
	if err != nil {
		return wrapped(CodeBadRequest, "session.id", err)
	}
	if t := program.ResultType(); t != "string" && t != "dyn" {
		return badRequest("session.id", "the expression produces %s; a session id is a string", t)
	}
	c.sessionID = program
	if session.InputSchema == nil {
		return badRequest("session.inputSchema", "the session needs an inputSchema, the JSON Schema of its input")
	}
	schema, err := compileSchema("session.inputSchema", session.InputSchema, true)
	if err != nil {
		return err
	}
	c.sessionSchema = schema
	return nil
}

func (c *Compiled) compileToolBlock() error {
	tool := c.definition.Tool
	if tool == nil {
		return nil
	}
	if tool.InputSchema == nil {
		return badRequest("tool.inputSchema", "a tool block needs an inputSchema, the JSON Schema of the tool's input")
	}
	schema, err := compileSchema("tool.inputSchema", tool.InputSchema, true)
	if err != nil {
		return err
	}
	c.inputSchema = schema
	if tool.OutputSchema != nil {
		if c.outputSchema, err = compileSchema("tool.outputSchema", tool.OutputSchema, false); err != nil {
			return err
		}
	}
	return nil
}

// compileSchema compiles a JSON Schema (2020-12 unless it says otherwise);
// a $ref outside the schema is refused. An input schema must be an object
// schema, as MCP lists tools.
func compileSchema(path string, schema map[string]any, object bool) (*anyschema.Validator, error) {
	if object {
		if t, _ := schema["type"].(string); t != "object" {
			return nil, badRequest(path, `the schema must have "type": "object"`)
		}
	}
	compiled, err := anyschema.Compile(schema)
	if err != nil {
		return nil, wrapped(CodeBadRequest, path, err)
	}
	return compiled, nil
}

// Definition is the compiled definition.
func (c *Compiled) Definition() Definition { return c.definition }

// Expression is a kind cel action's compiled config.expression, nil for
// other kinds. Evaluate it with {"event": {"data": input}}.
func (c *Compiled) Expression() *expr.Program { return c.expression }

// ValidateInput checks a call's input against the tool block's input schema.
// value must be JSON-shaped (as encoding/json decodes into any).
func (c *Compiled) ValidateInput(value any) error {
	return validateAgainst(c.inputSchema, "input", value)
}

// ValidateOutput checks a result against the tool block's output schema, if
// it declares one.
func (c *Compiled) ValidateOutput(value any) error {
	return validateAgainst(c.outputSchema, "output", value)
}

func validateAgainst(schema *anyschema.Validator, what string, value any) error {
	if schema == nil {
		return nil
	}
	// Every failing keyword at its place, in words: the validator's own
	// report names the schema by the address it was compiled under.
	if err := schema.Explain(value); err != nil {
		return newError(CodeBadRequest, what, fmt.Sprintf("the %s does not match its schema: %v", what, err), err)
	}
	return nil
}

// Scope is what fixed input reads.
type Scope struct {
	// Request is execution.input: for an MCP server, the recorded request.
	Request any
	// SessionID and SessionInput are session.id and session.input.
	SessionID    string
	SessionInput map[string]any
	// Event is event, for actions other than MCP servers.
	Event any
}

func (s Scope) vars() map[string]any {
	sessionInput := s.SessionInput
	if sessionInput == nil {
		sessionInput = map[string]any{}
	}
	vars := map[string]any{
		"execution": map[string]any{"input": s.Request},
		"session":   map[string]any{"id": s.SessionID, "input": sessionInput},
	}
	if s.Event != nil {
		vars["event"] = s.Event
	}
	return vars
}

// FixedInput evaluates tools[ref].input. A failure is a CEL_EVALUATION_ERROR
// *Error naming the field, which the endpoint returns as a tool error.
func (c *Compiled) FixedInput(ctx context.Context, ref int, scope Scope) (map[string]any, error) {
	if ref < 0 || ref >= len(c.fixed) {
		return nil, fmt.Errorf("action: no tools[%d] in %s", ref, c.definition.Name)
	}
	fields := c.fixed[ref]
	if len(fields) == 0 {
		return map[string]any{}, nil
	}
	return evaluateFields(ctx, fmt.Sprintf("tools[%d].input", ref), fields, scope.vars())
}

// ApplyFixedInput returns the call's effective input: the caller's arguments
// with every fixed value replacing what the caller supplied (ACT-028). The
// arguments are not modified.
func (c *Compiled) ApplyFixedInput(ctx context.Context, ref int, scope Scope, arguments map[string]any) (map[string]any, error) {
	fixed, err := c.FixedInput(ctx, ref, scope)
	if err != nil {
		return nil, err
	}
	return MergeFixed(arguments, fixed), nil
}

// MergeFixed returns arguments with fixed applied over them.
func MergeFixed(arguments, fixed map[string]any) map[string]any {
	out := make(map[string]any, len(arguments)+len(fixed))
	for k, v := range arguments {
		out[k] = v
	}
	for k, v := range fixed {
		out[k] = v
	}
	return out
}

func evaluateFields(ctx context.Context, path string, fields []field, vars map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(fields))
	for _, f := range fields {
		value, err := f.program.Eval(ctx, vars)
		if err != nil {
			return nil, wrapped(CodeCELEvaluation, path+"."+f.name, err)
		}
		out[f.name] = value
	}
	return out, nil
}

// ErrSessionInvalid is wrapped when a request does not produce a valid
// session input (the endpoint answers 400 mcp_session_invalid).
var ErrSessionInvalid = errors.New("the request does not produce a valid session input")

// SessionInput maps a request to its session's input through
// mcp.session.start.input, and validates it against session.inputSchema.
func (c *Compiled) SessionInput(ctx context.Context, request any) (map[string]any, error) {
	if c.definition.Kind != KindMCP {
		return nil, fmt.Errorf("action: %s is not an MCP server", c.definition.Name)
	}
	input, err := evaluateFields(ctx, "mcp.session.start.input", c.start, map[string]any{"execution": map[string]any{"input": request}})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSessionInvalid, err)
	}
	if c.sessionSchema != nil {
		if err := c.sessionSchema.Explain(input); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSessionInvalid, wrapped(CodeBadRequest, "session.inputSchema", err))
		}
	}
	return input, nil
}

// SessionID names the session of an input.
func (c *Compiled) SessionID(ctx context.Context, input map[string]any) (string, error) {
	if c.sessionID == nil {
		return "", fmt.Errorf("action: %s has no session", c.definition.Name)
	}
	id, err := c.sessionID.EvalString(ctx, map[string]any{"session": map[string]any{"input": input}})
	if err != nil {
		return "", wrapped(CodeCELEvaluation, "session.id", err)
	}
	return id, nil
}

// Cache keeps compiled definitions per action version. Versions are
// immutable, so an entry never goes stale; the cache forgets everything when
// it is full.
type Cache struct {
	mu      sync.Mutex
	limit   int
	entries map[cacheKey]*Compiled
}

type cacheKey struct {
	id      string
	version int
}

// NewCache returns a cache of at most limit compiled versions.
func NewCache(limit int) *Cache {
	return &Cache{limit: max(limit, 1), entries: map[cacheKey]*Compiled{}}
}

// Get returns the compiled definition of action id at version, compiling
// def the first time.
func (c *Cache) Get(id string, version int, def Definition) (*Compiled, error) {
	key := cacheKey{id, version}
	c.mu.Lock()
	compiled, ok := c.entries[key]
	c.mu.Unlock()
	if ok {
		return compiled, nil
	}
	compiled, err := Compile(def)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if existing, ok := c.entries[key]; ok {
		return existing, nil
	}
	if len(c.entries) >= c.limit {
		clear(c.entries)
	}
	c.entries[key] = compiled
	return compiled, nil
}
