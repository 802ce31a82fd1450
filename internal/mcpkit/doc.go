// Package mcpkit is what isx mcp and actiond's MCP endpoint share on top of
// the official MCP Go SDK: tools defined from Go types (schema.go, tool.go:
// input and output schema derived once, bounds declared once as struct tags,
// input validated once against the schema), JSON Schema 2020-12 validation
// with messages that name the argument at fault (validate.go), coded tool
// errors carried under each server's own _meta key (toolerror.go), sending
// notifications the SDK has no sender for (notify.go), and the wire types of
// the Tasks and Skills extensions, which no Go library implements (tasks.go,
// skills.go).
//
// It is not a server: each program registers and answers its own tools, and
// keeps its own error codes and task states.
package mcpkit
