package graph

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/validator/core"
)

// A misspelt property of an input ({nme: "double"}) is first of all an
// unknown property: gqlparser reports it after the required one it then
// misses ("Field ActionInput.name of required type String! was not
// provided"), and in variables as a bare "unknown field". explain says it
// the way a person fixes it: "unknown property nme of ActionInput (did you
// mean name?)", and drops the missing property the suggestion accounts for.

var (
	unknownLiteral = regexp.MustCompile(`^Field "([^"]+)" is not defined by type "([^"]+)"\.`)
	missingLiteral = regexp.MustCompile(`^Field "([^"]+)\.([^"]+)" of required type "([^"]+)" was not provided\.$`)
)

// explain rewrites the document's and the variables' errors about input
// properties; the others it keeps as they are.
func explain(errs gqlerror.List, op *ast.OperationDefinition) gqlerror.List {
	explained := map[string]bool{} // "<type>.<field>" an unknown property's suggestion names
	var unknown, others gqlerror.List
	for _, e := range errs {
		if m := unknownLiteral.FindStringSubmatch(e.Message); m != nil {
			e.Message = unknownProperty(m[1], schema().Types[m[2]], explained)
			unknown = append(unknown, e)
			continue
		}
		if isVariablePath(e.Path) {
			if e.Extensions == nil {
				e.Extensions = map[string]any{}
			}
			e.Extensions["hint"] = "Fix the variable's value at the path the message gives; introspection lists each input type's properties."
		}
		if e.Message == "unknown field" && isVariablePath(e.Path) {
			if parent := variableParent(op, e.Path); parent != nil {
				e.Message = pathText(e.Path) + ": " + unknownProperty(lastName(e.Path), parent, explained)
			}
		}
		if e.Message == "must be defined" && isVariablePath(e.Path) {
			if parent := variableParent(op, e.Path); parent != nil {
				e.Message = pathText(e.Path) + ": " + missingProperty(lastName(e.Path), parent)
			}
		}
		others = append(others, e)
	}
	out := unknown
	for _, e := range others {
		if m := missingLiteral.FindStringSubmatch(e.Message); m != nil {
			if explained[m[1]+"."+m[2]] {
				continue
			}
			e.Message = missingProperty(m[2], schema().Types[m[1]])
		}
		out = append(out, e)
	}
	return out
}

// unknownProperty says a property is not one of the type's, with the
// nearest it has, which it notes in explained.
func unknownProperty(name string, def *ast.Definition, explained map[string]bool) string {
	if def == nil {
		return fmt.Sprintf("unknown property %s", name)
	}
	var fields []string
	for _, f := range def.Fields {
		fields = append(fields, f.Name)
	}
	near := core.SuggestionList(name, fields)
	if len(near) == 0 {
		return fmt.Sprintf("unknown property %s of %s; it has %s", name, def.Name, strings.Join(fields, ", "))
	}
	for _, n := range near {
		explained[def.Name+"."+n] = true
	}
	return fmt.Sprintf("unknown property %s of %s (did you mean %s?)", name, def.Name, core.OrList(near...))
}

func missingProperty(name string, def *ast.Definition) string {
	if def == nil {
		return fmt.Sprintf("the required property %s is missing", name)
	}
	return fmt.Sprintf("the required property %s of %s is missing", name, def.Name)
}

// isVariablePath says whether an error is about a variable's value:
// gqlparser's path then starts with "variable" and the variable's name.
func isVariablePath(path ast.Path) bool {
	if len(path) < 3 {
		return false
	}
	first, ok := path[0].(ast.PathName)
	return ok && first == "variable"
}

// variableParent is the input type holding the path's last property.
func variableParent(op *ast.OperationDefinition, path ast.Path) *ast.Definition {
	if op == nil {
		return nil
	}
	name, _ := path[1].(ast.PathName)
	variable := op.VariableDefinitions.ForName(string(name))
	if variable == nil {
		return nil
	}
	t := variable.Type
	for _, element := range path[2 : len(path)-1] {
		switch e := element.(type) {
		case ast.PathIndex:
			if t.Elem == nil {
				return nil
			}
			t = t.Elem
		case ast.PathName:
			def := schema().Types[t.Name()]
			if def == nil {
				return nil
			}
			field := def.Fields.ForName(string(e))
			if field == nil {
				return nil
			}
			t = field.Type
		}
	}
	for t.Elem != nil {
		t = t.Elem
	}
	def := schema().Types[t.Name()]
	if def == nil || def.Kind != ast.InputObject {
		return nil
	}
	return def
}

func lastName(path ast.Path) string {
	name, _ := path[len(path)-1].(ast.PathName)
	return string(name)
}

// pathText writes a variable's path as a person does: $input.tools[0].nme.
func pathText(path ast.Path) string {
	var b strings.Builder
	for i, element := range path[1:] {
		switch e := element.(type) {
		case ast.PathIndex:
			fmt.Fprintf(&b, "[%d]", int(e))
		case ast.PathName:
			if i == 0 {
				b.WriteString("$" + string(e))
			} else {
				b.WriteString("." + string(e))
			}
		}
	}
	return b.String()
}
