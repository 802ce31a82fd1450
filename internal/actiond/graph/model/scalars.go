package model

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql"

	"github.com/incusspawn/isx/internal/coded"
)

// CodeBadRequest is the code of a scalar that does not read: the API's
// BAD_REQUEST.
const CodeBadRequest = "BAD_REQUEST"

// InputError is a scalar value that does not read. graph reports it with
// its code like any refused input.
type InputError struct{ coded.Base }

func inputError(cause error, format string, args ...any) *InputError {
	return &InputError{Base: coded.Base{Code: CodeBadRequest, Message: fmt.Sprintf(format, args...), Err: cause}}
}

// Error is the message alone: it already says what the cause said.
func (e *InputError) Error() string { return e.Message }

// JSON is the JSON scalar: any JSON value, held as its encoding. Object
// literals in a document arrive as maps and are encoded here.
type JSON json.RawMessage

// UnmarshalGQL implements graphql.Unmarshaler.
func (j *JSON) UnmarshalGQL(v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return inputError(err, "not a JSON value: %s", err.Error())
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
		return "", inputError(nil, "a policy action is a name such as SELECT or a pattern such as \"*\", not %v", v)
	}
	if strings.TrimSpace(s) == "" || strings.TrimSpace(s) != s {
		return "", inputError(nil, "policy action %q is empty or has surrounding spaces", s)
	}
	return s, nil
}

// MarshalTimestamp writes a time as RFC 3339 with nanoseconds.
func MarshalTimestamp(t time.Time) graphql.Marshaler { return graphql.MarshalTime(t) }

// UnmarshalTimestamp reads an RFC 3339 time. gqlparser leaves a custom
// scalar's variables unchecked, so a bad one arrives here and is refused
// as the caller's mistake, not the server's.
func UnmarshalTimestamp(v any) (time.Time, error) {
	t, err := graphql.UnmarshalTime(v)
	if err != nil {
		return time.Time{}, inputError(err, "a Timestamp is an RFC 3339 time such as \"2026-03-02T09:00:00Z\", not %v", v)
	}
	return t, nil
}
