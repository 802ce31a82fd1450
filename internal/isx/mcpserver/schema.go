package mcpserver

import (
	"fmt"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
)

// Schemas are derived from the Go types the tools decode into and encode
// from, so that what a tool lists and what it does cannot drift apart.
// Objects are closed (additionalProperties: false); fields without
// omitempty are required. Enumerations come from typeSchemas.

// TaskState is a task's state, the same word in every tool (seed 000).
type TaskState string

// Task states. Unknown appears only where a session reports what it last
// saw (list_instances, cancel_task); released only in notifications.
const (
	TaskRunning  TaskState = "running"
	TaskFinished TaskState = "finished"
	TaskAttached TaskState = "attached"
	TaskLost     TaskState = "lost"
	TaskUnknown  TaskState = "unknown"
)

// InstanceState is an MCP instance's state as list_instances reports it.
type InstanceState string

const (
	// InstanceCreating: this session holds it and it is not ready yet.
	InstanceCreating InstanceState = "creating"
	// InstanceReady: this session holds it and it is ready.
	InstanceReady InstanceState = "ready"
	// InstanceHeld: another live session holds it.
	InstanceHeld InstanceState = "held"
	// InstanceOrphaned: its session ended or died; adopt_instance takes it.
	InstanceOrphaned InstanceState = "orphaned"
)

// TaskKind is what runs in a task.
type TaskKind string

const (
	KindCommand  TaskKind = "command"
	KindDelegate TaskKind = "delegate"
)

var typeSchemas = map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[TaskState]():     {Type: "string", Enum: []any{"running", "finished", "attached", "lost", "unknown"}},
	reflect.TypeFor[InstanceState](): {Type: "string", Enum: []any{"creating", "ready", "held", "orphaned"}},
	reflect.TypeFor[TaskKind]():      {Type: "string", Enum: []any{"command", "delegate"}},
}

// schemaFor derives T's schema.
func schemaFor[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](&jsonschema.ForOptions{TypeSchemas: typeSchemas})
	if err != nil {
		// The types are ours and fixed: failing here is a programming error.
		panic(fmt.Sprintf("isxmcp: schema of %T: %v", *new(T), err))
	}
	normalize(s)
	return s
}

// normalize drops the null the inference allows for Go slices and
// pointers (isx never sends null: an absent value is left out),
// recursively.
func normalize(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if len(s.Types) == 2 && s.Types[0] == "null" {
		s.Type, s.Types = s.Types[1], nil
	}
	for _, p := range s.Properties {
		normalize(p)
	}
	normalize(s.Items)
	if s.AdditionalProperties != nil {
		normalize(s.AdditionalProperties)
	}
	for _, o := range s.OneOf {
		normalize(o)
	}
}

// property returns the named property of an object schema.
func property(s *jsonschema.Schema, name string) *jsonschema.Schema {
	p, ok := s.Properties[name]
	if !ok {
		panic(fmt.Sprintf("isxmcp: schema has no property %q", name))
	}
	return p
}

// readFromInstance narrows a state property to what is read from an
// instance, which is never unknown.
func readFromInstance(s *jsonschema.Schema, name string) {
	property(s, name).Enum = []any{"running", "finished", "attached", "lost"}
}

func ptr[T any](v T) *T { return &v }

// The input constraints the decoder enforces, stated in the schemas too.

func withKeyPattern(s *jsonschema.Schema, name string) {
	p := property(s, name)
	p.Pattern = `^[A-Za-z0-9._:-]{1,64}$`
	p.MinLength, p.MaxLength = ptr(1), ptr(64)
}

func withInstanceName(s *jsonschema.Schema, name string) {
	p := property(s, name)
	p.Pattern = `^[A-Za-z][A-Za-z0-9-]{0,62}$`
	p.MaxLength = ptr(maxInstanceName)
}

func withTaskID(s *jsonschema.Schema, name string) {
	property(s, name).Pattern = `^t-[a-z2-7]{10}$`
}

func withRange(s *jsonschema.Schema, name string, low, high int) {
	p := property(s, name)
	p.Minimum, p.Maximum = ptr(float64(low)), ptr(float64(high))
}
