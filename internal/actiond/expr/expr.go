// Package expr is the platform's CEL environment: standard CEL, the strings
// extension, and the platform's functions uuid, decimal, money and date (see
// doc.go). Programs compile once and evaluate many times, concurrently, under
// a cost limit and the caller's context.
package expr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/interpreter"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/coded"
)

// CodeEvaluation is the machine-readable code of every error this package
// returns: GraphQL puts it in extensions.code, a tool error in its code.
const CodeEvaluation = "CEL_EVALUATION_ERROR"

// DefaultCostLimit bounds the work of one evaluation (CEL runtime cost units,
// roughly one per operation and per element a comprehension visits).
const DefaultCostLimit = 1_000_000

// maxSourceLength bounds an expression's text, in code points.
const maxSourceLength = 32 * 1024

type config struct {
	variables []string
	// typed are variables declared with the type of their value.
	typed     map[string]*cel.Type
	costLimit uint64
	impure    bool
	clock     clock.Clock
	random    io.Reader
}

// Option configures an Env.
type Option func(*config) error

// Variables declares top-level variables, each a map from string keys to
// dynamic values (the JSON objects the platform passes in).
func Variables(names ...string) Option {
	return func(c *config) error {
		for _, name := range names {
			if name == "" || slices.Contains(c.variables, name) {
				return fmt.Errorf("expr: variable %q declared twice or empty", name)
			}
			c.variables = append(c.variables, name)
		}
		return nil
	}
}

// VariablesOf declares a variable for each of values, with the CEL type of
// its value: an int64 is an int, a float64 a double, a string, bool, list
// or map what it is, nil null. The caller passes the values it evaluates
// with, so an expression such as x + 1 checks against what x holds; see
// JSONNumbers for values decoded from JSON.
func VariablesOf(values map[string]any) Option {
	return func(c *config) error {
		if c.typed == nil {
			c.typed = map[string]*cel.Type{}
		}
		for name, value := range values {
			if name == "" || slices.Contains(c.variables, name) {
				return fmt.Errorf("expr: variable %q declared twice or empty", name)
			}
			c.typed[name] = typeOf(value)
		}
		return nil
	}
}

func typeOf(value any) *cel.Type {
	switch value.(type) {
	case nil:
		return cel.NullType
	case bool:
		return cel.BoolType
	case int, int32, int64:
		return cel.IntType
	case uint, uint32, uint64:
		return cel.UintType
	case float32, float64:
		return cel.DoubleType
	case string:
		return cel.StringType
	case []any:
		return cel.ListType(cel.DynType)
	case map[string]any:
		return cel.MapType(cel.StringType, cel.DynType)
	}
	return cel.DynType
}

// JSONNumbers returns v with every float64 that holds a whole number within
// int64's range as an int64, at any depth. Values decoded from JSON carry
// every number as a float64, and CEL adds no double to an int: {"x": 41}
// read this way makes x + 1 an int sum, as the literal 41 would be.
func JSONNumbers(v any) any {
	switch v := v.(type) {
	case float64:
		if v == math.Trunc(v) && v >= math.MinInt64 && v < math.MaxInt64 && !math.IsInf(v, 0) {
			return int64(v)
		}
		return v
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = JSONNumbers(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = JSONNumbers(x)
		}
		return out
	}
	return v
}

// CostLimit replaces DefaultCostLimit.
func CostLimit(limit uint64) Option {
	return func(c *config) error {
		if limit == 0 {
			return errors.New("expr: cost limit must be positive")
		}
		c.costLimit = limit
		return nil
	}
}

// Impure adds uuid.New() and time.Now(), which read the given clock and
// randomness. Only the server's cel tool, called from a Starlark program,
// builds an Env with it: everywhere else (fixed input, session ids, policy
// assertions, cel tools) an expression must give the same answer every time.
func Impure(now clock.Clock, random io.Reader) Option {
	return func(c *config) error {
		if now == nil || random == nil {
			return errors.New("expr: Impure needs a clock and a source of randomness")
		}
		c.impure, c.clock, c.random = true, now, random
		return nil
	}
}

// Env compiles expressions. It is safe for concurrent use.
type Env struct {
	cel       *cel.Env
	costLimit uint64
	impure    bool
}

// NewEnv builds an environment.
func NewEnv(options ...Option) (*Env, error) {
	c := config{costLimit: DefaultCostLimit}
	for _, option := range options {
		if err := option(&c); err != nil {
			return nil, err
		}
	}
	celOptions := []cel.EnvOption{
		ext.Strings(),
		cel.ParserExpressionSizeLimit(maxSourceLength),
		cel.CrossTypeNumericComparisons(true),
		cel.DefaultUTCTimeZone(true),
	}
	celOptions = append(celOptions, pureFunctions()...)
	if c.impure {
		celOptions = append(celOptions, impureFunctions(c.clock, c.random)...)
	}
	for _, name := range c.variables {
		celOptions = append(celOptions, cel.Variable(name, cel.MapType(cel.StringType, cel.DynType)))
	}
	for name, typ := range c.typed {
		celOptions = append(celOptions, cel.Variable(name, typ))
	}
	env, err := cel.NewEnv(celOptions...)
	if err != nil {
		return nil, fmt.Errorf("expr: building the CEL environment: %w", err)
	}
	return &Env{cel: env, costLimit: c.costLimit, impure: c.impure}, nil
}

// MustNewEnv is NewEnv for package-level environments whose options are
// constant.
func MustNewEnv(options ...Option) *Env {
	env, err := NewEnv(options...)
	if err != nil {
		panic(err)
	}
	return env
}

// Compile parses and type-checks src. Its error is an *Error naming the
// expression and the position of the first problem.
func (e *Env) Compile(src string) (*Program, error) {
	ast, issues := e.cel.Compile(src)
	if issues != nil && issues.Err() != nil {
		return nil, e.compileError(src, issues)
	}
	loops := hasComprehension(ast)
	options := []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize), cel.CustomDecoratorV2(boundedCalls)}
	if e.needsCostTracking(ast) {
		options = append(options, cel.CostLimit(e.costLimit))
	}
	if loops {
		options = append(options, cel.InterruptCheckFrequency(100))
	}
	program, err := e.cel.Program(ast, options...)
	if err != nil {
		return nil, newError(src, StageCompile, err.Error(), err)
	}
	return &Program{source: src, ast: ast, program: program, loops: loops}, nil
}

// assumedInputSize bounds, for the static estimate, the size of every string,
// list and map an expression reads from its variables: the platform's
// records of a request are smaller.
const assumedInputSize = 1 << 20

// needsCostTracking reports whether the static cost estimate of the
// expression, with every input at most assumedInputSize, may exceed the cost
// limit. Runtime tracking doubles the time of a small evaluation, and an
// expression whose estimate stays under the limit does work at most linear in
// its input, so only the others pay for it.
func (e *Env) needsCostTracking(ast *cel.Ast) bool {
	estimate, err := e.cel.EstimateCost(ast, boundedInputs{})
	return err != nil || estimate.Max > e.costLimit
}

type boundedInputs struct{}

func (boundedInputs) EstimateSize(cost.AstNode) *cost.SizeEstimate {
	return &cost.SizeEstimate{Min: 0, Max: assumedInputSize}
}

func (boundedInputs) EstimateCallCost(string, string, *cost.AstNode, []cost.AstNode) *cost.CallEstimate {
	return nil
}

func hasComprehension(ast *cel.Ast) bool {
	found := false
	celast.PreOrderVisit(ast.NativeRep().Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		if e.Kind() == celast.ComprehensionKind {
			found = true
		}
	}))
	return found
}

func (e *Env) compileError(src string, issues *cel.Issues) error {
	all := issues.Errors()
	first := all[0]
	message := first.Message
	if !e.impure {
		for _, name := range []string{"uuid.New", "time.Now"} {
			if strings.Contains(src, name) && strings.Contains(message, "undeclared reference") {
				message += "; " + name + "() reads the clock or randomness and is only available through the cel tool, called from a program"
			}
		}
	}
	if len(all) > 1 {
		message += fmt.Sprintf(" (and %d more problems)", len(all)-1)
	}
	failed := newError(src, StageCompile, message, issues.Err())
	failed.Line, failed.Column = first.Location.Line(), first.Location.Column()+1
	return failed
}

// Program is a compiled expression. It is immutable and safe for concurrent
// use: compile once per definition version and keep it.
type Program struct {
	source  string
	ast     *cel.Ast
	program cel.Program
	// loops is whether the expression has a comprehension, the only place
	// where evaluation checks its context.
	loops bool
}

// Source is the expression's text.
func (p *Program) Source() string { return p.source }

// ResultType is the checked type of the result, such as "bool", "string",
// "dyn" or "map(string, dyn)".
func (p *Program) ResultType() string { return p.ast.OutputType().String() }

// Eval evaluates the program. vars maps each declared variable to a value
// built of maps, lists, strings, numbers, bools and nil (JSON-shaped). The
// result is JSON-shaped too; see doc.go for how platform values come out.
func (p *Program) Eval(ctx context.Context, vars map[string]any) (any, error) {
	value, err := p.evalValue(ctx, vars)
	if err != nil {
		return nil, err
	}
	out, err := plain(value)
	if err != nil {
		return nil, p.evalError(err, 0)
	}
	return out, nil
}

// EvalBool evaluates a program that must produce a bool.
func (p *Program) EvalBool(ctx context.Context, vars map[string]any) (bool, error) {
	value, err := p.evalValue(ctx, vars)
	if err != nil {
		return false, err
	}
	b, ok := value.(types.Bool)
	if !ok {
		return false, p.evalError(fmt.Errorf("the expression produced %s, not a bool", value.Type().TypeName()), 0)
	}
	return bool(b), nil
}

// EvalString evaluates a program that must produce a string.
func (p *Program) EvalString(ctx context.Context, vars map[string]any) (string, error) {
	value, err := p.evalValue(ctx, vars)
	if err != nil {
		return "", err
	}
	s, ok := value.(types.String)
	if !ok {
		return "", p.evalError(fmt.Errorf("the expression produced %s, not a string", value.Type().TypeName()), 0)
	}
	return string(s), nil
}

func (p *Program) evalValue(ctx context.Context, vars map[string]any) (ref.Val, error) {
	if vars == nil {
		vars = map[string]any{}
	}
	var out ref.Val
	var err error
	if p.loops {
		out, _, err = p.program.ContextEval(ctx, vars)
	} else if err = ctx.Err(); err == nil {
		out, _, err = p.program.Eval(vars)
	}
	if err == nil {
		return out, nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return nil, p.evalError(fmt.Errorf("evaluation stopped: %w", ctxErr), 0)
	}
	if errors.Is(err, ErrBuildLimit) {
		return nil, p.evalError(err, 0)
	}
	var cancelled interpreter.EvalCancelledError
	if errors.As(err, &cancelled) && cancelled.Cause == interpreter.CostLimitExceeded {
		return nil, p.evalError(fmt.Errorf("%w: the expression did more work than its cost limit allows", ErrCostLimit), 0)
	}
	var node int64
	if celErr, ok := err.(*types.Err); ok {
		node = celErr.NodeID()
	}
	return nil, p.evalError(err, node)
}

// ErrCostLimit is wrapped by the error of an evaluation stopped by its cost
// limit.
var ErrCostLimit = errors.New("cost limit exceeded")

func (p *Program) evalError(err error, node int64) *Error {
	e := newError(p.source, StageEvaluate, err.Error(), err)
	if node != 0 {
		location := p.ast.NativeRep().SourceInfo().GetStartLocation(node)
		if location != common.NoLocation {
			e.Line, e.Column = location.Line(), location.Column()+1
		}
	}
	return e
}

// Stages of an Error.
const (
	StageCompile  = "compile"
	StageEvaluate = "evaluate"
)

// Error is a CEL expression that failed to compile or to evaluate. Its
// code is always CodeEvaluation; Message is what CEL said.
type Error struct {
	coded.Base
	Expression string
	Stage      string // StageCompile or StageEvaluate
	// Line and Column are 1-based; 0 when the position is unknown.
	Line, Column int
}

func newError(src, stage, message string, cause error) *Error {
	return &Error{Base: coded.Base{Code: CodeEvaluation, Message: message, Err: cause}, Expression: src, Stage: stage}
}

func (e *Error) Error() string {
	where := ""
	if e.Line > 0 {
		where = fmt.Sprintf(" at %d:%d", e.Line, e.Column)
	}
	verb := "failed to evaluate"
	if e.Stage == StageCompile {
		verb = "does not compile"
	}
	return fmt.Sprintf("CEL expression %s %s%s: %s", quoteExpression(e.Expression), verb, where, e.Message)
}

func quoteExpression(src string) string {
	const limit = 200
	runes := []rune(src)
	if len(runes) > limit {
		return fmt.Sprintf("%q…", string(runes[:limit]))
	}
	return fmt.Sprintf("%q", src)
}

// Integers returns v with every whole float64 that schema types as an
// integer as an int64, at any depth its properties, additionalProperties
// and items describe. JSON carries every number as a double, and CEL adds
// no double to an int, so a property the input schema calls an integer
// reads as CEL's int (n * 2) and one it calls a number as its double
// (x * 1.5). What the schema does not describe is left as it is.
func Integers(v any, schema map[string]any) any {
	if schema == nil {
		return v
	}
	switch v := v.(type) {
	case float64:
		if typedInteger(schema) && v == math.Trunc(v) && v >= math.MinInt64 && v < math.MaxInt64 {
			return int64(v)
		}
	case map[string]any:
		properties, _ := schema["properties"].(map[string]any)
		additional, _ := schema["additionalProperties"].(map[string]any)
		out := make(map[string]any, len(v))
		for key, value := range v {
			sub, _ := properties[key].(map[string]any)
			if sub == nil {
				sub = additional
			}
			out[key] = Integers(value, sub)
		}
		return out
	case []any:
		items, _ := schema["items"].(map[string]any)
		out := make([]any, len(v))
		for i, value := range v {
			out[i] = Integers(value, items)
		}
		return out
	}
	return v
}

// typedInteger says whether schema's type admits integers and not other
// numbers: "integer", or a list of types naming integer and not number.
func typedInteger(schema map[string]any) bool {
	switch t := schema["type"].(type) {
	case string:
		return t == "integer"
	case []any:
		integer, number := false, false
		for _, name := range t {
			integer = integer || name == "integer"
			number = number || name == "number"
		}
		return integer && !number
	}
	return false
}
