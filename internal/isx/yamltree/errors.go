package yamltree

import (
	"fmt"
)

// Error is a problem in the file. Line is 0 when no single line is at
// fault, Key the path to the setting (like "run[2].user"; "" for the whole
// file), Message what is wrong and what to do. Err is yaml.v3's own error
// when the file is not valid YAML.
type Error struct {
	File    string
	Line    int
	Key     string
	Message string
	Err     error
}

// Error reads "file:line: key: message", leaving out what is not known.
func (e *Error) Error() string {
	s := e.Message
	if e.Key != "" {
		s = e.Key + ": " + s
	}
	switch {
	case e.File != "" && e.Line > 0:
		s = fmt.Sprintf("%s:%d: %s", e.File, e.Line, s)
	case e.File != "":
		s = e.File + ": " + s
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

func (r *Reader) fail(line int, key, format string, args ...any) error {
	return r.wrap(&Error{File: r.File, Line: line, Key: key, Message: fmt.Sprintf(format, args...)})
}

func (r *Reader) wrap(e *Error) error {
	if r.NewError != nil {
		return r.NewError(e)
	}
	return e
}
