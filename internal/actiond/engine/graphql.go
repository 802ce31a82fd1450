package engine

import (
	"context"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/policy"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// GraphQL runs an operation against the platform's API inside a unit of
// work, under policy layers.
type GraphQL interface {
	Execute(ctx context.Context, op Operation) (data any, err error)
	// Validate checks a document against the schema without running it,
	// and returns the variables that the operation operationName names (""
	// for a document of one operation) requires: non-null, without a
	// default. Its error says what is wrong, with line:column.
	Validate(document, operationName string) (required []string, err error)
}

// Operation is one GraphQL operation a call runs.
type Operation struct {
	Account       string
	Work          *store.Work
	Layers        []policy.Layer
	Claims        map[string]any
	Principal     string
	Query         string
	Variables     map[string]any
	OperationName string
}

// graphQLArgs are the native graphql tool's arguments.
type graphQLArgs struct {
	Query         string         `json:"query" jsonschema:"The GraphQL document." minLength:"1"`
	Variables     map[string]any `json:"variables,omitempty" jsonschema:"Values for the document's variables."`
	OperationName string         `json:"operationName,omitempty" jsonschema:"Which operation of the document to run."`
}

// graphQLResult is what the native graphql tool answers.
type graphQLResult struct {
	Data any `json:"data" jsonschema:"The operation's data."`
}

var graphQLTool = mcpkit.NewTool[graphQLArgs, graphQLResult](mcpkit.Spec{
	Name: action.NativeGraphQL,
	Description: "Runs one GraphQL operation against the platform's API as you, bounded by this server's policies. " +
		"Pass query (the document), and variables and operationName when the document needs them. " +
		"Answers with the operation's data; an error is a tool error naming what was denied or wrong.",
	Types: []mcpkit.TypeSchema{jsonObject},
})

// nativeGraphQL runs the native graphql tool. Its output is the JSON object
// graphQLResult describes, as a map: the endpoint sends an object as
// structuredContent, and a script's graphql() reads data from it.
func (e *callEnv) nativeGraphQL(ctx context.Context, input map[string]any) (any, *Failure) {
	args, failure := decode(graphQLTool, input)
	if failure != nil {
		return nil, failure
	}
	data, failure := e.graphQL(ctx, args.Query, variables(input), args.OperationName)
	if failure != nil {
		return nil, failure
	}
	return map[string]any{"data": data}, nil
}

// graphQLAction runs an action of kind graphql: its document with its fixed
// variables, then the call's input over them.
func (e *callEnv) graphQLAction(ctx context.Context) (any, *Failure) {
	config := e.target.action.Definition.Config
	document, _ := config["document"].(string)
	operation, _ := config["operationName"].(string)
	variables := map[string]any{}
	if fixed, ok := config["variables"].(map[string]any); ok {
		for k, v := range fixed {
			variables[k] = v
		}
	}
	for k, v := range e.input {
		variables[k] = v
	}
	return e.graphQL(ctx, document, variables, operation)
}

func (e *callEnv) graphQL(ctx context.Context, query string, variables map[string]any, operation string) (any, *Failure) {
	c := e.request.call
	data, err := e.request.runner.GraphQL.Execute(ctx, Operation{
		Account: c.Account, Work: e.work, Layers: e.layers, Claims: c.Who.Claims, Principal: c.Who.Principal,
		Query: query, Variables: variables, OperationName: operation,
	})
	if err != nil {
		return nil, asFailure(err)
	}
	return data, nil
}
