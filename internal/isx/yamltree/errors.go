package yamltree

import (
	"fmt"

	"github.com/incusspawn/isx/internal/coded"
)

// Error is a problem in the file. Line is 0 when no single line is at
// fault, Key the path to the setting (like "run[2].user"; "" for the whole
// file), Message what is wrong and what to do. Err is yaml.v3's own error
// when the file is not valid YAML. It has no code: the package reading the
// file gives it one with Reader.NewError.
type Error struct {
	coded.Base
	File string
	Line int
	Key  string
}

// Error reads "file:line: key: message", leaving out what is not known.
func (e *Error) Error() string { return Locate(e.File, e.Line, e.Key, e.Message) }

// Locate prefixes message with where it applies, "file:line: key: ",
// leaving out what is not known (a line without a file means nothing to a
// reader). Every package that reports problems in a settings file words
// them this way.
func Locate(file string, line int, key, message string) string {
	s := message
	if key != "" {
		s = key + ": " + s
	}
	switch {
	case file != "" && line > 0:
		s = fmt.Sprintf("%s:%d: %s", file, line, s)
	case file != "":
		s = file + ": " + s
	}
	return s
}

func (r *Reader) fail(line int, key, format string, args ...any) error {
	return r.wrap(&Error{Base: coded.Base{Message: fmt.Sprintf(format, args...)}, File: r.File, Line: line, Key: key})
}

func (r *Reader) wrap(e *Error) error {
	if r.NewError != nil {
		return r.NewError(e)
	}
	return e
}
