// Package graph is actiond's GraphQL API: the resolvers, written by hand,
// behind the HTTP handler (handler.go) and behind the operations a tool's
// graphql() runs inside a unit of work (execute.go). gqlgen generates the
// executable schema into graph/generated and the schema's Go types into
// graph/model from schema.graphqls and gqlgen.yml.
package graph

// gqlgen is a tool of this module (the tool directive in go.mod), so that
// its own dependencies are in go.sum and this runs from a clean checkout.
//go:generate go tool gqlgen generate --config gqlgen.yml
