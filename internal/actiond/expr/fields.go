package expr

import (
	"slices"

	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
)

// Fields reports which fields of the value at path the expression reads.
// With path ("session", "input"), `session.input.subject` and
// `session.input["subject"]` read "subject". A presence test such as
// has(session.input.subject) reads nothing. Any other use of the value at
// path, or of a prefix of it, such as passing session.input whole to a
// function or indexing it with a computed key, sets whole: the expression may
// read every field.
func (p *Program) Fields(path ...string) (fields []string, whole bool) {
	if len(path) == 0 {
		return nil, false
	}
	var visit func(node celast.NavigableExpr)
	visit = func(node celast.NavigableExpr) {
		if depth := pathDepth(node, path); depth > 0 {
			field, use := classifyUse(node, path, depth)
			switch use {
			case useField:
				if !slices.Contains(fields, field) {
					fields = append(fields, field)
				}
			case useWhole:
				whole = true
			}
		}
		for _, child := range node.Children() {
			visit(child)
		}
	}
	visit(celast.NavigateAST(p.ast.NativeRep()))
	slices.Sort(fields)
	return fields, whole
}

type use int

const (
	useNone  use = iota // extended by its parent, a presence test, or another branch
	useField            // a constant field of the value at path
	useWhole            // anything else
)

// classifyUse looks at how the parent of a node matching depth segments of
// path uses it.
func classifyUse(node celast.NavigableExpr, path []string, depth int) (string, use) {
	parent, ok := node.Parent()
	if !ok {
		return "", useWhole
	}
	segment, testOnly, constant := step(parent, node)
	switch {
	case !constant:
		return "", useWhole
	case testOnly:
		return "", useNone
	case depth == len(path):
		return segment, useField
	default:
		// The parent selects a segment: either the next one of path, which
		// the parent's own visit handles, or another branch, which is not
		// the value at path.
		return "", useNone
	}
}

// step reports the constant segment parent takes from child: a field
// selection or an index with a constant string. constant is false when the
// parent uses child in any other way.
func step(parent celast.NavigableExpr, child celast.NavigableExpr) (segment string, testOnly, constant bool) {
	switch parent.Kind() {
	case celast.SelectKind:
		sel := parent.AsSelect()
		if sel.Operand().ID() == child.ID() {
			return sel.FieldName(), sel.IsTestOnly(), true
		}
	case celast.CallKind:
		call := parent.AsCall()
		args := call.Args()
		if call.FunctionName() == operators.Index && len(args) == 2 && args[0].ID() == child.ID() &&
			args[1].Kind() == celast.LiteralKind {
			if s, ok := args[1].AsLiteral().(types.String); ok {
				return string(s), false, true
			}
		}
	}
	return "", false, false
}

// pathDepth is the number of leading segments of path that node spells
// exactly, or 0.
func pathDepth(node celast.Expr, path []string) int {
	switch node.Kind() {
	case celast.IdentKind:
		if node.AsIdent() == path[0] {
			return 1
		}
	case celast.SelectKind:
		sel := node.AsSelect()
		if sel.IsTestOnly() {
			return 0
		}
		if d := pathDepth(sel.Operand(), path); d > 0 && d < len(path) && sel.FieldName() == path[d] {
			return d + 1
		}
	case celast.CallKind:
		call := node.AsCall()
		args := call.Args()
		if call.FunctionName() != operators.Index || len(args) != 2 || args[1].Kind() != celast.LiteralKind {
			return 0
		}
		key, ok := args[1].AsLiteral().(types.String)
		if !ok {
			return 0
		}
		if d := pathDepth(args[0], path); d > 0 && d < len(path) && string(key) == path[d] {
			return d + 1
		}
	}
	return 0
}
