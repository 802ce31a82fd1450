package graph

// gqlgen is a tool of this module (the tool directive in go.mod), so that
// its own dependencies are in go.sum and this runs from a clean checkout.
//go:generate go tool gqlgen generate --config gqlgen.yml
