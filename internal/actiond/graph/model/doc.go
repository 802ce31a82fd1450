// Package model holds the Go types of the GraphQL API's schema: those gqlgen
// generates (models_gen.go) and those it binds to (types.go and
// scalars.go). It sits below both the generated executor
// (graph/generated) and the resolvers (graph), so that neither imports the
// other's package for a type: the executor calls the resolvers through the
// interfaces it generates, and the types whose fields are methods (an
// action, an execution, a session, the mutation namespaces) are interfaces
// here that graph implements.
package model
