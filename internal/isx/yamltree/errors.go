package yamltree

import (
	"fmt"

	"github.com/incusspawn/isx/internal/coded"
)

// Place is where in a file a problem is: Line is 0 when no single line is
// at fault, Key the path to the setting (like "run[2].user"; "" for the
// whole file). Every package that reports problems in a settings file
// says where with it.
type Place struct {
	File string
	Line int
	Key  string
}

// Locate prefixes message with the place, "file:line: key: ", leaving out
// what is not known (a line without a file means nothing to a reader).
func (p Place) Locate(message string) string {
	s := message
	if p.Key != "" {
		s = p.Key + ": " + s
	}
	switch {
	case p.File != "" && p.Line > 0:
		s = fmt.Sprintf("%s:%d: %s", p.File, p.Line, s)
	case p.File != "":
		s = p.File + ": " + s
	}
	return s
}

// Error is a problem in a file: Message says what is wrong and what to do.
// The reader's own problems have no code and Err is yaml.v3's error when
// the file is not valid YAML; a package reading its settings gives each
// problem its code (Reader.NewError) and its own type, embedding Located.
type Error struct {
	coded.Base
	Place
}

// Located is Error under the name a package's own error type embeds it by
// (embedding Error would make a field named Error, which hides the method).
type Located = Error

// Problem is a coded problem at a place.
func Problem(code string, place Place, err error, format string, args ...any) Located {
	return Located{Base: coded.Base{Code: code, Message: fmt.Sprintf(format, args...), Err: err}, Place: place}
}

// Error reads "file:line: key: message", leaving out what is not known.
func (e *Error) Error() string { return e.Locate(e.Message) }

func (r *Reader) fail(line int, key, format string, args ...any) error {
	return r.wrap(&Error{Base: coded.Base{Message: fmt.Sprintf(format, args...)}, Place: Place{File: r.File, Line: line, Key: key}})
}

func (r *Reader) wrap(e *Error) error {
	if r.NewError != nil {
		return r.NewError(e)
	}
	return e
}
