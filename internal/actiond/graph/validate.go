package graph

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/incusspawn/isx/internal/actiond/graph/generated"
)

// Operation is what Validate learns of a document's operation.
type Operation struct {
	Name string
	// Type is "query" or "mutation".
	Type      string
	Variables []Variable
}

// Variable is one variable an operation declares.
type Variable struct {
	Name string
	// Type as written, such as "ID!" or "[String!]".
	Type string
	// Required: non-null and without a default, so a call must pass it.
	Required bool
}

var (
	schema = sync.OnceValue(func() *ast.Schema {
		return generated.NewExecutableSchema(generated.Config{Resolvers: &Resolver{}}).Schema()
	})
	validated = lru.New[*ast.QueryDocument](queryCacheSize)
)

// Validate checks a document against the schema without running it, and
// returns the operation operationName names ("" when the document has one
// operation), with the variables it declares. A document that fails is a
// GRAPHQL_VALIDATION_FAILED *Error whose message gives line:column of each
// problem. Valid documents are cached by their text.
func Validate(document, operationName string) (*Operation, error) {
	ctx := context.Background()
	doc, ok := validated.Get(ctx, document)
	if !ok {
		var errs []string
		parsed, list := gqlparser.LoadQuery(schema(), document)
		for _, e := range list {
			position := ""
			if len(e.Locations) > 0 {
				position = fmt.Sprintf("%d:%d: ", e.Locations[0].Line, e.Locations[0].Column)
			}
			errs = append(errs, position+e.Message)
		}
		if len(errs) > 0 {
			return nil, newError(CodeValidationFailed, "", "the GraphQL document is not valid: "+strings.Join(errs, "; "), nil)
		}
		doc = parsed
		validated.Add(ctx, document, doc)
	}
	operation, err := pick(doc, operationName)
	if err != nil {
		return nil, err
	}
	out := &Operation{Name: operation.Name, Type: string(operation.Operation)}
	for _, v := range operation.VariableDefinitions {
		out.Variables = append(out.Variables, Variable{
			Name:     v.Variable,
			Type:     v.Type.String(),
			Required: v.Type.NonNull && v.DefaultValue == nil,
		})
	}
	return out, nil
}

func pick(doc *ast.QueryDocument, name string) (*ast.OperationDefinition, error) {
	if name == "" {
		if len(doc.Operations) != 1 {
			return nil, newError(CodeValidationFailed, "operationName", fmt.Sprintf("the document has %d operations: name the one to run", len(doc.Operations)), nil)
		}
		return doc.Operations[0], nil
	}
	operation := doc.Operations.ForName(name)
	if operation == nil {
		return nil, newError(CodeValidationFailed, "operationName", fmt.Sprintf("the document has no operation named %q", name), nil)
	}
	return operation, nil
}
