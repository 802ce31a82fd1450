package starlark

import "go.starlark.net/syntax"

// Names of the builtins a rewritten program calls. They begin with '$',
// which no identifier a script writes can, so a script can neither call
// them by name nor shadow them.
const (
	hiddenBinary   = "$binary"
	hiddenUnary    = "$unary"
	hiddenInplace  = "$inplace"
	hiddenAugIndex = "$augindex"
	hiddenAugAttr  = "$augattr"
	hiddenSlice    = "$slice"
	hiddenMethod   = "$method"
	hiddenCall     = "$callmethod"
	hiddenSpread   = "$spread"
	hiddenTuple    = "$tuple"
	hiddenKey      = "$key"
)

// allocatingMethods are the methods of the built-in types that build a
// value as large as their receiver or arguments, or compare elements; a
// selection of any other name cannot reach one (a method is found by its
// name), so only these are rewritten.
var allocatingMethods = map[string]bool{
	"capitalize": true, "format": true, "join": true, "lower": true, "replace": true, "rsplit": true,
	"split": true, "splitlines": true, "title": true, "upper": true, "elem_ords": true, "codepoint_ords": true,
	"items": true, "keys": true, "values": true, "update": true, "extend": true, "index": true, "remove": true,
	"union": true, "intersection": true, "difference": true, "symmetric_difference": true,
	"issubset": true, "issuperset": true, "encode": true, "decode": true, "indent": true,
}

// rewrite makes every operation of the file that can allocate more than a
// constant, or walk a value for long, a call of a hidden builtin that
// measures it first (guarded.go). Positions are kept, so tracebacks name
// the script's own lines.
func rewrite(f *syntax.File) {
	for i, s := range f.Stmts {
		f.Stmts[i] = stmt(s)
	}
}

func stmts(list []syntax.Stmt) {
	for i, s := range list {
		list[i] = stmt(s)
	}
}

func stmt(s syntax.Stmt) syntax.Stmt {
	switch s := s.(type) {
	case *syntax.AssignStmt:
		return assign(s)
	case *syntax.ExprStmt:
		s.X = rewritten(s.X)
	case *syntax.DefStmt:
		params(s.Params)
		stmts(s.Body)
		if args := starArgs(s.Params); args != nil {
			check := &syntax.ExprStmt{X: call(hiddenChecked, args.NamePos, &syntax.Ident{NamePos: args.NamePos, Name: args.Name})}
			s.Body = append([]syntax.Stmt{check}, s.Body...)
		}
	case *syntax.ForStmt:
		s.Vars = target(s.Vars)
		s.X = rewritten(s.X)
		stmts(s.Body)
	case *syntax.WhileStmt:
		s.Cond = rewritten(s.Cond)
		stmts(s.Body)
	case *syntax.IfStmt:
		s.Cond = rewritten(s.Cond)
		stmts(s.True)
		stmts(s.False)
	case *syntax.ReturnStmt:
		if s.Result != nil {
			s.Result = rewritten(s.Result)
		}
	}
	return s
}

func params(list []syntax.Expr) {
	for _, p := range list {
		if b, ok := p.(*syntax.BinaryExpr); ok && b.Op == syntax.EQ {
			b.Y = rewritten(b.Y) // a default value
		}
	}
}

// target rewrites what an assignment's left side evaluates (an index, the
// object of a field), not the place it assigns to.
func target(e syntax.Expr) syntax.Expr {
	switch e := e.(type) {
	case *syntax.IndexExpr:
		e.X, e.Y = rewritten(e.X), rewritten(e.Y)
	case *syntax.DotExpr:
		e.X = rewritten(e.X)
	case *syntax.TupleExpr:
		for i, x := range e.List {
			e.List[i] = target(x)
		}
	case *syntax.ListExpr:
		for i, x := range e.List {
			e.List[i] = target(x)
		}
	case *syntax.ParenExpr:
		e.X = target(e.X)
	}
	return e
}

// assign rewrites x op= y so that the operation is measured, keeping
// Starlark's order (the place's operands, then y) and its in-place update
// of a list.
func assign(s *syntax.AssignStmt) syntax.Stmt {
	if s.Op == syntax.EQ {
		s.LHS = target(s.LHS)
		s.RHS = rewritten(s.RHS)
		return s
	}
	s.RHS = rewritten(s.RHS)
	if numberLiteral(s.RHS) && s.Op != syntax.STAR_EQ && s.Op != syntax.LTLT_EQ && s.Op != syntax.PERCENT_EQ {
		s.LHS = target(s.LHS)
		return s // an int or float op, no larger than its operands
	}
	op := opLiteral(s.Op, s.OpPos)
	switch lhs := s.LHS.(type) {
	case *syntax.Ident:
		s.RHS = call(hiddenInplace, s.OpPos, op, &syntax.Ident{NamePos: lhs.NamePos, Name: lhs.Name}, s.RHS)
		s.Op = syntax.EQ
		return s
	case *syntax.IndexExpr:
		return &syntax.ExprStmt{X: call(hiddenAugIndex, s.OpPos, rewritten(lhs.X), rewritten(lhs.Y), op, s.RHS)}
	case *syntax.DotExpr:
		name := &syntax.Literal{Token: syntax.STRING, TokenPos: lhs.NamePos, Raw: `"` + lhs.Name.Name + `"`, Value: lhs.Name.Name}
		return &syntax.ExprStmt{X: call(hiddenAugAttr, s.OpPos, rewritten(lhs.X), name, op, s.RHS)}
	}
	s.LHS = target(s.LHS)
	return s
}

func rewritten(e syntax.Expr) syntax.Expr {
	switch e := e.(type) {
	case *syntax.BinaryExpr:
		e.X, e.Y = rewritten(e.X), rewritten(e.Y)
		if measured(e) {
			return call(hiddenBinary, e.OpPos, opLiteral(e.Op, e.OpPos), e.X, e.Y)
		}
		return e
	case *syntax.UnaryExpr:
		if e.X != nil {
			e.X = rewritten(e.X)
			if (e.Op == syntax.MINUS || e.Op == syntax.TILDE || e.Op == syntax.PLUS) && !numberLiteral(e.X) {
				return call(hiddenUnary, e.OpPos, opLiteral(e.Op, e.OpPos), e.X)
			}
		}
		return e
	case *syntax.CallExpr:
		for i, arg := range e.Args {
			e.Args[i] = argument(arg)
		}
		if dot, ok := e.Fn.(*syntax.DotExpr); ok && allocatingMethods[dot.Name.Name] {
			// x.name(args) in one call: $callmethod(x, "name", args).
			name := &syntax.Literal{Token: syntax.STRING, TokenPos: dot.NamePos, Raw: `"` + dot.Name.Name + `"`, Value: dot.Name.Name}
			args := append([]syntax.Expr{rewritten(dot.X), name}, e.Args...)
			return &syntax.CallExpr{Fn: &syntax.Ident{NamePos: e.Lparen, Name: hiddenCall}, Lparen: e.Lparen, Args: args, Rparen: e.Rparen}
		}
		e.Fn = rewritten(e.Fn)
		return e
	case *syntax.DotExpr:
		e.X = rewritten(e.X)
		if allocatingMethods[e.Name.Name] {
			name := &syntax.Literal{Token: syntax.STRING, TokenPos: e.NamePos, Raw: `"` + e.Name.Name + `"`, Value: e.Name.Name}
			return call(hiddenMethod, e.Dot, e.X, name)
		}
		return e
	case *syntax.SliceExpr:
		none := func(x syntax.Expr) syntax.Expr {
			if x == nil {
				return &syntax.Ident{NamePos: e.Lbrack, Name: "None"}
			}
			return rewritten(x)
		}
		return call(hiddenSlice, e.Lbrack, rewritten(e.X), none(e.Lo), none(e.Hi), none(e.Step))
	case *syntax.IndexExpr:
		// Left to the interpreter: an index builds nothing, and a missing
		// key it names is at most a string of the budget's size or a tuple,
		// whose text is bounded where it is made (checkResult).
		e.X, e.Y = rewritten(e.X), rewritten(e.Y)
		return e
	case *syntax.ParenExpr:
		e.X = rewritten(e.X)
		return e
	case *syntax.ListExpr:
		for i, x := range e.List {
			e.List[i] = rewritten(x)
		}
		return e
	case *syntax.TupleExpr:
		allLiteral := true
		for i, x := range e.List {
			e.List[i] = rewritten(x)
			if _, ok := e.List[i].(*syntax.Literal); !ok {
				allLiteral = false
			}
		}
		if allLiteral {
			return e
		}
		pos := e.Lparen
		if !pos.IsValid() {
			pos = syntax.Start(e.List[0])
		}
		return call(hiddenTuple, pos, e.List...)
	case *syntax.DictExpr:
		for _, x := range e.List {
			entry := x.(*syntax.DictEntry)
			entry.Key, entry.Value = key(rewritten(entry.Key), entry.Colon), rewritten(entry.Value)
		}
		return e
	case *syntax.Comprehension:
		for _, clause := range e.Clauses {
			switch c := clause.(type) {
			case *syntax.ForClause:
				c.Vars = target(c.Vars)
				c.X = rewritten(c.X)
			case *syntax.IfClause:
				c.Cond = rewritten(c.Cond)
			}
		}
		if entry, ok := e.Body.(*syntax.DictEntry); ok {
			entry.Key, entry.Value = key(rewritten(entry.Key), entry.Colon), rewritten(entry.Value)
		} else {
			e.Body = rewritten(e.Body)
		}
		return e
	case *syntax.CondExpr:
		e.Cond, e.True, e.False = rewritten(e.Cond), rewritten(e.True), rewritten(e.False)
		return e
	case *syntax.LambdaExpr:
		params(e.Params)
		e.Body = rewritten(e.Body)
		if args := starArgs(e.Params); args != nil {
			e.Body = call(hiddenThen, args.NamePos, call(hiddenChecked, args.NamePos, &syntax.Ident{NamePos: args.NamePos, Name: args.Name}), e.Body)
		}
		return e
	}
	return e
}

// starArgs is the *args parameter of a function: the call makes a tuple
// of what it is passed, which a hash may walk, so the function checks it.
func starArgs(list []syntax.Expr) *syntax.Ident {
	for _, p := range list {
		if u, ok := p.(*syntax.UnaryExpr); ok && u.Op == syntax.STAR {
			if id, ok := u.X.(*syntax.Ident); ok {
				return id
			}
		}
	}
	return nil
}

// key measures a dict key that is not a literal: a key is hashed, and
// named in full when it is missing or repeated.
func key(e syntax.Expr, pos syntax.Position) syntax.Expr {
	if _, literal := e.(*syntax.Literal); literal {
		return e
	}
	return call(hiddenKey, pos, e)
}

// argument rewrites a call's argument: *x and **x are spread by the call
// into a tuple or dict of x's size, so x is measured first.
func argument(arg syntax.Expr) syntax.Expr {
	switch a := arg.(type) {
	case *syntax.UnaryExpr:
		if (a.Op == syntax.STAR || a.Op == syntax.STARSTAR) && a.X != nil {
			a.X = call(hiddenSpread, a.OpPos, rewritten(a.X))
			return a
		}
	case *syntax.BinaryExpr:
		if a.Op == syntax.EQ {
			a.Y = rewritten(a.Y) // a named argument
			return a
		}
	}
	return rewritten(arg)
}

// measured says whether a binary operation can build something larger
// than its operands, or walk them: not when it is plain arithmetic on a
// number written in the source.
func measured(e *syntax.BinaryExpr) bool {
	switch e.Op {
	case syntax.AND, syntax.OR:
		return false
	case syntax.STAR, syntax.LTLT:
		return !(numberLiteral(e.X) && numberLiteral(e.Y))
	case syntax.PERCENT:
		return !numberLiteral(e.X)
	case syntax.EQL, syntax.NEQ, syntax.LT, syntax.LE, syntax.GT, syntax.GE, syntax.IN, syntax.NOT_IN:
		return !literal(e.X) && !literal(e.Y)
	}
	return !numberLiteral(e.X) && !numberLiteral(e.Y)
}

func numberLiteral(e syntax.Expr) bool {
	l, ok := e.(*syntax.Literal)
	return ok && (l.Token == syntax.INT || l.Token == syntax.FLOAT)
}

func literal(e syntax.Expr) bool {
	_, ok := e.(*syntax.Literal)
	return ok
}

func opLiteral(op syntax.Token, pos syntax.Position) syntax.Expr {
	return &syntax.Literal{Token: syntax.INT, TokenPos: pos, Raw: "0", Value: int64(op)}
}

// call makes the call of a hidden builtin at pos, the position tracebacks
// give for it.
func call(name string, pos syntax.Position, args ...syntax.Expr) *syntax.CallExpr {
	return &syntax.CallExpr{Fn: &syntax.Ident{NamePos: pos, Name: name}, Lparen: pos, Args: args, Rparen: pos}
}
