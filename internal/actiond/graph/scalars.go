package graph

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/99designs/gqlgen/graphql"
)

// JSON is the JSON scalar: any JSON value, held as its encoding. Object
// literals in a document arrive as maps and are encoded here.
type JSON json.RawMessage

// UnmarshalGQL implements graphql.Unmarshaler.
func (j *JSON) UnmarshalGQL(v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return newError(CodeBadRequest, "", "not a JSON value: "+err.Error(), err)
	}
	*j = raw
	return nil
}

// MarshalGQL implements graphql.Marshaler.
func (j JSON) MarshalGQL(w io.Writer) {
	if len(j) == 0 {
		_, _ = io.WriteString(w, "null")
		return
	}
	_, _ = w.Write(j)
}

// MarshalJSON writes the value as it is, so that an input object holding a
// JSON field encodes as the definition JSON it stands for.
func (j JSON) MarshalJSON() ([]byte, error) {
	if len(j) == 0 {
		return []byte("null"), nil
	}
	return j, nil
}

// toJSON encodes v for a JSON field; nil stays null.
func toJSON(v any) (JSON, error) {
	if v == nil {
		return nil, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("graph: encode a JSON field: %w", err)
	}
	if string(raw) == "null" {
		return nil, nil
	}
	return raw, nil
}

// MarshalPolicyAction writes a policy action as a string.
func MarshalPolicyAction(s string) graphql.Marshaler {
	return graphql.WriterFunc(func(w io.Writer) { _, _ = io.WriteString(w, strconv.Quote(s)) })
}

// UnmarshalPolicyAction reads a policy action written bare (SELECT, which a
// document gives as an enum literal and gqlparser leaves unchecked for a
// custom scalar) or quoted ("*", "actions:*").
func UnmarshalPolicyAction(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", badRequest("", "a policy action is a name such as SELECT or a pattern such as \"*\", not %v", v)
	}
	if strings.TrimSpace(s) == "" || strings.TrimSpace(s) != s {
		return "", badRequest("", "policy action %q is empty or has surrounding spaces", s)
	}
	return s, nil
}
