package starlark

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.starlark.net/resolve"
	"go.starlark.net/syntax"

	"github.com/incusspawn/isx/internal/coded"
)

// Position is a place in a script.
type Position struct {
	File      string
	Line, Col int
}

func (p Position) String() string { return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col) }

func position(p syntax.Position) Position {
	return Position{File: p.Filename(), Line: int(p.Line), Col: int(p.Col)}
}

// Analysis is what a script's syntax tree says before it runs, for a caller
// that refuses a script naming a tool it does not offer, or passing
// graphql() a document the schema rejects, before anything runs.
//
// The analysis reads what is fixed in the source: tools.<name> and
// getattr(tools, "<name>"), and graphql() documents that are string
// literals, concatenations of them, constants (a global or local assigned
// once), or parameters of the script's own functions at each direct call,
// through any number of calls. What it cannot read is left to run time,
// where the host checks every call anyway: a document chosen by a
// conditional, built in a loop, formatted, taken from event, passed through
// a function used as a value or a lambda, or a call with a check argument
// other than a literal True.
type Analysis struct {
	// ToolNames are the distinct tools.<name> the script references, sorted.
	ToolNames []string
	// ToolPositions holds the first reference of each of ToolNames.
	ToolPositions map[string]Position
	// ToolsDynamic is set when the script uses tools other than as
	// tools.<name> or getattr(tools, "<name>"), so ToolNames may be
	// incomplete; such tools are refused when the script reaches them.
	ToolsDynamic bool
	// GraphQL holds each document known before the script runs, one per
	// call path, in source order.
	GraphQL []GraphQLUse
	// RunTimeGraphQL are the graphql() calls with a path on which the
	// document, or the check argument, is known only at run time.
	RunTimeGraphQL []Position
}

// GraphQLUse is one document that reaches a graphql() call.
type GraphQLUse struct {
	Call     Position // the graphql() call
	Document string
	// OperationName is the operation_name argument; "" when none is passed.
	// OperationNameKnown is false when it is chosen at run time.
	OperationName      string
	OperationNameKnown bool
	// Variables names the variables the call passes, sorted. VariablesKnown
	// is false when the variables are not a dict literal with literal keys.
	Variables      []string
	VariablesKnown bool
	// Route says how the document reaches the call, from where it is
	// written to the call, for a message a person can follow.
	Route []string
}

// Describe renders Route as a sentence: "the constant QUERY (program.star:1:1),
// passed as doc to fetch() at program.star:8:12, reaches graphql() at
// program.star:4:12".
func (u GraphQLUse) Describe() string {
	return strings.Join(u.Route, ", ") + ", reaches graphql() at " + u.Call.String()
}

// Check parses and resolves a script, requires run to be defined as a
// function of one parameter, and analyses it. A refused script is an *Error
// with CodeInputInvalid whose message gives file:line:col of each problem.
// Results are cached with the compiled program, so Check then Run compiles
// once.
func Check(script Script) (*Analysis, error) {
	compiled, err := compile(script)
	if err != nil {
		return nil, err
	}
	return compiled.analysis, nil
}

func invalid(message string) *Error {
	return &Error{Base: coded.Base{
		Code:    CodeInputInvalid,
		Message: message,
		Hint:    "Fix the script at the position the message gives; a script defines def run(event): and returns its result.",
	}}
}

// staticError renders parse and resolve errors with their positions.
func staticError(err error) *Error {
	var list resolve.ErrorList
	if errors.As(err, &list) {
		lines := make([]string, len(list))
		for i, e := range list {
			lines[i] = e.Error()
		}
		return invalid(strings.Join(lines, "\n"))
	}
	return invalid(err.Error())
}

// checkShape requires a def run(event) and refuses load.
func checkShape(file *syntax.File) *Error {
	var run *syntax.DefStmt
	for _, stmt := range file.Stmts {
		switch stmt := stmt.(type) {
		case *syntax.LoadStmt:
			return invalid(fmt.Sprintf("%s: load is not available: a script is one file", stmt.Load))
		case *syntax.DefStmt:
			if stmt.Name.Name == runName {
				run = stmt
			}
		}
	}
	if run == nil {
		return invalid(fmt.Sprintf("%s: the script does not define run: define it as def run(event):", file.Path))
	}
	if len(run.Params) != 1 {
		return invalid(fmt.Sprintf("%s: run takes one parameter, event, not %d", run.Def, len(run.Params)))
	}
	if _, ok := run.Params[0].(*syntax.Ident); !ok {
		return invalid(fmt.Sprintf("%s: run takes one plain parameter, event", run.Def))
	}
	return nil
}

// The parameters of graphql(), in order.
var graphqlParams = []string{"document", "variables", "operation_name", "check"}

// Bounds of the analysis; a path past them is left to run time.
const (
	maxCallDepth = 16
	maxPaths     = 64
	maxFoldDepth = 64
)

// binder is one place a name gets its value.
type binder struct {
	kind  binderKind
	name  *syntax.Ident
	value syntax.Expr     // right-hand side of an assignment, default of a parameter
	owner *syntax.DefStmt // function the name is local to; nil for a global or a lambda's
}

type binderKind int

const (
	bindOther binderKind = iota // for loops, tuple assignments, augmented assignments, lambdas' parameters
	bindAssign
	bindParam
	bindDef
)

type callSite struct {
	call *syntax.CallExpr
	in   *syntax.DefStmt // nil at top level or in a lambda
	// inLambda: the call is in a lambda, whose callers cannot be followed.
	inLambda bool
}

// frame is one static call path to a function: its arguments at the call,
// evaluated in the caller's frame.
type frame struct {
	fn     *syntax.DefStmt // nil for the top level
	call   *syntax.CallExpr
	caller *frame
	args   map[*syntax.Ident]syntax.Expr // parameter (first binding) → argument
}

type analyzer struct {
	binders   map[*syntax.Ident][]binder // by the binding's first identifier
	defs      map[*syntax.Ident]*syntax.DefStmt
	callSites map[*syntax.DefStmt][]callSite
	escapes   map[*syntax.DefStmt]bool
	paths     map[*syntax.DefStmt]pathSet
	callees   map[*syntax.Ident]bool
	toolRefs  map[*syntax.Ident]bool
	calls     []callSite // every call of a plain name
	graphql   []callSite
	analysis  *Analysis
}

func analyse(file *syntax.File) *Analysis {
	a := &analyzer{
		binders:   map[*syntax.Ident][]binder{},
		defs:      map[*syntax.Ident]*syntax.DefStmt{},
		callSites: map[*syntax.DefStmt][]callSite{},
		escapes:   map[*syntax.DefStmt]bool{},
		paths:     map[*syntax.DefStmt]pathSet{},
		callees:   map[*syntax.Ident]bool{},
		toolRefs:  map[*syntax.Ident]bool{},
		analysis:  &Analysis{ToolPositions: map[string]Position{}},
	}
	a.collect(file)
	a.resolveCalls()
	for _, g := range a.graphql {
		a.documents(g)
	}
	slices.Sort(a.analysis.ToolNames)
	return a.analysis
}

func bindingOf(id *syntax.Ident) *resolve.Binding {
	b, _ := id.Binding.(*resolve.Binding)
	return b
}

func isPredeclaredIdent(e syntax.Expr, name string) bool {
	id, ok := e.(*syntax.Ident)
	if !ok || id.Name != name {
		return false
	}
	b := bindingOf(id)
	return b != nil && b.Scope == resolve.Predeclared
}

func isUniversal(e syntax.Expr, name string) bool {
	id, ok := e.(*syntax.Ident)
	if !ok || id.Name != name {
		return false
	}
	b := bindingOf(id)
	// The universe's builtins that build values are predeclared in their
	// measured form (guarded.go); they are the same builtins to a script.
	return b != nil && (b.Scope == resolve.Universal || b.Scope == resolve.Predeclared && guarded.Has(name))
}

// collect walks the tree, recording bindings, calls and references, with
// the function each sits in.
func (a *analyzer) collect(file *syntax.File) {
	var functions []syntax.Node // enclosing *DefStmt and *LambdaExpr, innermost last
	var nodes []syntax.Node     // the path from the root, to pop functions
	syntax.Walk(file, func(n syntax.Node) bool {
		if n == nil {
			top := nodes[len(nodes)-1]
			nodes = nodes[:len(nodes)-1]
			if len(functions) > 0 && functions[len(functions)-1] == top {
				functions = functions[:len(functions)-1]
			}
			return false
		}
		nodes = append(nodes, n)
		var owner *syntax.DefStmt
		inLambda := false
		if len(functions) > 0 {
			owner, _ = functions[len(functions)-1].(*syntax.DefStmt)
			inLambda = owner == nil
		}
		a.visit(n, owner, inLambda)
		switch n.(type) {
		case *syntax.DefStmt, *syntax.LambdaExpr:
			functions = append(functions, n)
		}
		return true
	})
	a.markEscapes(file)
}

func (a *analyzer) visit(n syntax.Node, owner *syntax.DefStmt, inLambda bool) {
	switch n := n.(type) {
	case *syntax.DefStmt:
		a.bind(n.Name, binder{kind: bindDef, name: n.Name, owner: owner})
		a.defs[n.Name] = n
		a.params(n.Params, n)
	case *syntax.LambdaExpr:
		a.params(n.Params, nil)
	case *syntax.AssignStmt:
		if id, ok := n.LHS.(*syntax.Ident); ok && n.Op == syntax.EQ {
			a.bind(id, binder{kind: bindAssign, name: id, value: n.RHS, owner: owner})
		} else {
			a.bindAll(n.LHS)
		}
	case *syntax.ForStmt:
		a.bindAll(n.Vars)
	case *syntax.ForClause:
		a.bindAll(n.Vars)
	case *syntax.CallExpr:
		a.visitCall(n, callSite{call: n, in: owner, inLambda: inLambda})
	case *syntax.DotExpr:
		if isPredeclaredIdent(n.X, toolsName) {
			a.toolRefs[n.X.(*syntax.Ident)] = true
			a.tool(n.Name.Name, n.Name.NamePos)
		}
	case *syntax.Ident:
		// Parents come first, so a tools.<name> has marked its tools already.
		if isPredeclaredIdent(n, toolsName) && !a.toolRefs[n] {
			a.analysis.ToolsDynamic = true
		}
	}
}

func (a *analyzer) visitCall(call *syntax.CallExpr, site callSite) {
	if id, ok := call.Fn.(*syntax.Ident); ok {
		a.callees[id] = true
		a.calls = append(a.calls, site)
	}
	if isPredeclaredIdent(call.Fn, graphqlName) {
		a.graphql = append(a.graphql, site)
	}
	if isUniversal(call.Fn, "getattr") && len(call.Args) >= 2 && isPredeclaredIdent(call.Args[0], toolsName) {
		if name, ok := call.Args[1].(*syntax.Literal); ok && name.Token == syntax.STRING {
			a.toolRefs[call.Args[0].(*syntax.Ident)] = true
			a.tool(name.Value.(string), name.TokenPos)
		}
	}
}

// markEscapes finds functions named other than as a callee: they can be
// called from where the analysis cannot follow.
func (a *analyzer) markEscapes(file *syntax.File) {
	syntax.Walk(file, func(n syntax.Node) bool {
		id, ok := n.(*syntax.Ident)
		if !ok || a.callees[id] {
			return true
		}
		if b := bindingOf(id); b != nil && b.First != nil && b.First != id {
			if def := a.defs[b.First]; def != nil {
				a.escapes[def] = true
			}
		}
		return true
	})
}

func (a *analyzer) tool(name string, pos syntax.Position) {
	if _, seen := a.analysis.ToolPositions[name]; !seen {
		a.analysis.ToolNames = append(a.analysis.ToolNames, name)
		a.analysis.ToolPositions[name] = position(pos)
	}
}

func (a *analyzer) bind(id *syntax.Ident, b binder) {
	binding := bindingOf(id)
	if binding == nil || binding.First == nil {
		return
	}
	a.binders[binding.First] = append(a.binders[binding.First], b)
}

// bindAll records every name in a target as bound in a way the analysis does
// not follow.
func (a *analyzer) bindAll(target syntax.Expr) {
	syntax.Walk(target, func(n syntax.Node) bool {
		if id, ok := n.(*syntax.Ident); ok {
			a.bind(id, binder{kind: bindOther, name: id})
		}
		return true
	})
}

func (a *analyzer) params(params []syntax.Expr, def *syntax.DefStmt) {
	for _, p := range params {
		kind := bindParam
		if def == nil {
			kind = bindOther
		}
		switch p := p.(type) {
		case *syntax.Ident:
			a.bind(p, binder{kind: kind, name: p, owner: def})
		case *syntax.BinaryExpr: // name=default
			if id, ok := p.X.(*syntax.Ident); ok {
				a.bind(id, binder{kind: kind, name: id, value: p.Y, owner: def})
			}
		case *syntax.UnaryExpr: // *args, **kwargs
			if id, ok := p.X.(*syntax.Ident); ok {
				a.bind(id, binder{kind: bindOther, name: id})
			}
		}
	}
}

// resolveCalls records, for each function, the calls that name it directly.
func (a *analyzer) resolveCalls() {
	for _, site := range a.calls {
		b := bindingOf(site.call.Fn.(*syntax.Ident))
		if b == nil || b.First == nil {
			continue
		}
		if def := a.defs[b.First]; def != nil {
			a.callSites[def] = append(a.callSites[def], site)
		}
	}
}

// frames lists the static call paths to fn, at most maxPaths. complete is
// false when fn can also be reached in ways the analysis does not follow.
// Results are memoized, so a deep call graph costs each function once.
func (a *analyzer) frames(fn *syntax.DefStmt) ([]*frame, bool) {
	if fn == nil {
		return []*frame{{}}, true
	}
	if known, ok := a.paths[fn]; ok {
		return known.frames, known.complete
	}
	// A cycle of calls fails at run time (no recursion); its paths are not followed.
	a.paths[fn] = pathSet{}
	var paths []*frame
	complete := !a.escapes[fn]
	if fn.Name.Name == runName && a.isTopLevel(fn) {
		// The runtime calls run(event); event is known only at run time.
		paths = append(paths, &frame{fn: fn})
	}
	for _, site := range a.callSites[fn] {
		if site.inLambda {
			complete = false
			continue
		}
		callers, ok := a.frames(site.in)
		complete = complete && ok
		args, ok := matchArgs(fn, site.call)
		complete = complete && ok
		for _, caller := range callers {
			if len(paths) >= maxPaths {
				complete = false
				break
			}
			paths = append(paths, &frame{fn: fn, call: site.call, caller: caller, args: args})
		}
	}
	a.paths[fn] = pathSet{frames: paths, complete: complete}
	return paths, complete
}

type pathSet struct {
	frames   []*frame
	complete bool
}

func (a *analyzer) isTopLevel(def *syntax.DefStmt) bool {
	b := bindingOf(def.Name)
	return b != nil && b.Scope == resolve.Global
}

// matchArgs pairs a call's arguments with fn's parameters. ok is false when
// *args or **kwargs make the pairing unknown.
func matchArgs(fn *syntax.DefStmt, call *syntax.CallExpr) (map[*syntax.Ident]syntax.Expr, bool) {
	args := map[*syntax.Ident]syntax.Expr{}
	var names []*syntax.Ident
	for _, p := range fn.Params {
		switch p := p.(type) {
		case *syntax.Ident:
			names = append(names, p)
		case *syntax.BinaryExpr:
			names = append(names, p.X.(*syntax.Ident))
		default: // * or *args: later parameters are keyword-only
			names = append(names, nil)
		}
	}
	position := 0
	for _, arg := range call.Args {
		switch arg := arg.(type) {
		case *syntax.UnaryExpr: // *args, **kwargs
			return args, false
		case *syntax.BinaryExpr:
			if key, ok := arg.X.(*syntax.Ident); ok && arg.Op == syntax.EQ {
				for _, name := range names {
					if name != nil && name.Name == key.Name {
						args[firstOf(name)] = arg.Y
					}
				}
				continue
			}
		}
		if position < len(names) && names[position] != nil {
			args[firstOf(names[position])] = arg
		}
		position++
	}
	return args, true
}

func firstOf(id *syntax.Ident) *syntax.Ident {
	if b := bindingOf(id); b != nil && b.First != nil {
		return b.First
	}
	return id
}

// follow finds the expression a name stands for on the path fr, the frame
// to read that expression in, and the step of the route it adds.
func (a *analyzer) follow(id *syntax.Ident, fr *frame) (syntax.Expr, *frame, string, bool) {
	b := bindingOf(id)
	if b == nil || b.First == nil {
		return nil, nil, "", false
	}
	binders := a.binders[b.First]
	if len(binders) != 1 {
		return nil, nil, "", false
	}
	bound := binders[0]
	switch bound.kind {
	case bindAssign:
		if bound.owner == nil {
			return bound.value, nil, fmt.Sprintf("the constant %s (%s)", id.Name, position(bound.name.NamePos)), true
		}
		owner := frameOf(fr, bound.owner)
		if owner == nil {
			return nil, nil, "", false
		}
		return bound.value, owner, fmt.Sprintf("the variable %s (%s)", id.Name, position(bound.name.NamePos)), true
	case bindParam:
		owner := frameOf(fr, bound.owner)
		if owner == nil || owner.call == nil {
			return nil, nil, "", false
		}
		step := fmt.Sprintf("passed as %s to %s() at %s", id.Name, bound.owner.Name.Name, position(owner.call.Lparen))
		if arg, ok := owner.args[b.First]; ok {
			return arg, owner.caller, step, true
		}
		if bound.value != nil {
			return bound.value, nil, fmt.Sprintf("the default of %s (%s)", id.Name, position(bound.name.NamePos)), true
		}
	}
	return nil, nil, "", false
}

// frameOf finds fn's frame on the path: a nested function's frame sits
// below the frames of the functions that enclose it.
func frameOf(fr *frame, fn *syntax.DefStmt) *frame {
	for ; fr != nil; fr = fr.caller {
		if fr.fn == fn {
			return fr
		}
	}
	return nil
}

// foldString evaluates e when it is a string fixed in the source on the
// path fr, with the route by which it gets there, source first.
func (a *analyzer) foldString(e syntax.Expr, fr *frame, depth int) (string, []string, bool) {
	if depth > maxFoldDepth {
		return "", nil, false
	}
	switch e := e.(type) {
	case *syntax.Literal:
		if e.Token == syntax.STRING {
			return e.Value.(string), []string{fmt.Sprintf("the string literal at %s", position(e.TokenPos))}, true
		}
	case *syntax.ParenExpr:
		return a.foldString(e.X, fr, depth+1)
	case *syntax.BinaryExpr:
		if e.Op != syntax.PLUS {
			return "", nil, false
		}
		x, _, ok := a.foldString(e.X, fr, depth+1)
		if !ok {
			return "", nil, false
		}
		y, _, ok := a.foldString(e.Y, fr, depth+1)
		if !ok {
			return "", nil, false
		}
		return x + y, []string{fmt.Sprintf("the concatenation at %s", position(e.OpPos))}, true
	case *syntax.Ident:
		value, in, step, ok := a.follow(e, fr)
		if !ok {
			return "", nil, false
		}
		text, route, ok := a.foldString(value, in, depth+1)
		if !ok {
			return "", nil, false
		}
		return text, append(route, step), true
	}
	return "", nil, false
}

func isNone(e syntax.Expr) bool { return e == nil || isUniversal(e, "None") }

// foldOperation reads operation_name: none, or a fixed string.
func (a *analyzer) foldOperation(e syntax.Expr, fr *frame) (string, bool) {
	if isNone(e) {
		return "", true
	}
	name, _, ok := a.foldString(e, fr, 0)
	return name, ok
}

// foldVariables reads the names of the variables passed: none, or a dict
// literal whose keys are fixed strings, directly or through names.
func (a *analyzer) foldVariables(e syntax.Expr, fr *frame, depth int) ([]string, bool) {
	if isNone(e) {
		return []string{}, true
	}
	if depth > maxFoldDepth {
		return nil, false
	}
	switch e := e.(type) {
	case *syntax.ParenExpr:
		return a.foldVariables(e.X, fr, depth+1)
	case *syntax.Ident:
		value, in, _, ok := a.follow(e, fr)
		if !ok {
			return nil, false
		}
		return a.foldVariables(value, in, depth+1)
	case *syntax.DictExpr:
		names := make([]string, 0, len(e.List))
		for _, entry := range e.List {
			name, _, ok := a.foldString(entry.(*syntax.DictEntry).Key, fr, depth+1)
			if !ok {
				return nil, false
			}
			names = append(names, name)
		}
		slices.Sort(names)
		return slices.Compact(names), true
	}
	return nil, false
}

// graphqlArgs pairs a graphql() call's arguments with its parameters.
func graphqlArgs(call *syntax.CallExpr) (map[string]syntax.Expr, bool) {
	args := map[string]syntax.Expr{}
	for i, arg := range call.Args {
		switch arg := arg.(type) {
		case *syntax.UnaryExpr:
			return nil, false
		case *syntax.BinaryExpr:
			if key, ok := arg.X.(*syntax.Ident); ok && arg.Op == syntax.EQ {
				args[key.Name] = arg.Y
				continue
			}
		}
		if i >= len(graphqlParams) {
			return nil, false
		}
		args[graphqlParams[i]] = arg
	}
	return args, true
}

// documents records the documents that reach one graphql() call.
func (a *analyzer) documents(site callSite) {
	at := position(site.call.Lparen)
	runTime := func() {
		if !slices.Contains(a.analysis.RunTimeGraphQL, at) {
			a.analysis.RunTimeGraphQL = append(a.analysis.RunTimeGraphQL, at)
		}
	}
	args, ok := graphqlArgs(site.call)
	if check, given := args["check"]; !ok || site.inLambda || (given && !isUniversal(check, "True")) {
		runTime()
		return
	}
	paths, complete := a.frames(site.in)
	if !complete {
		runTime()
	}
	for _, fr := range paths {
		document, route, ok := a.foldString(args["document"], fr, 0)
		if !ok {
			runTime()
			continue
		}
		use := GraphQLUse{Call: at, Document: document, Route: route}
		use.OperationName, use.OperationNameKnown = a.foldOperation(args["operation_name"], fr)
		use.Variables, use.VariablesKnown = a.foldVariables(args["variables"], fr, 0)
		a.analysis.GraphQL = append(a.analysis.GraphQL, use)
	}
}
