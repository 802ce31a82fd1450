// Package usage tells a command-line usage error from a failure, the same
// way for isx and actiond: both exit 2 for the one and 1 for the other.
package usage

import (
	"errors"
	"fmt"
	"strings"
)

// Error is a usage error a command makes itself.
type Error struct{ Err error }

func (e Error) Error() string { return e.Err.Error() }
func (e Error) Unwrap() error { return e.Err }

// Errorf makes a usage error.
func Errorf(format string, args ...any) error { return Error{fmt.Errorf(format, args...)} }

// Is reports whether err is a usage error: one of ours, or one cobra
// makes itself, which carries no type to match and is known by its words.
func Is(err error) bool {
	var usage Error
	return errors.As(err, &usage) || cobraUsage(err)
}

func cobraUsage(err error) bool {
	msg := err.Error()
	for _, prefix := range []string{"unknown command", "required flag", "accepts ", "requires at least", "unknown shorthand flag", "unknown flag", "invalid argument"} {
		if strings.HasPrefix(msg, prefix) {
			return true
		}
	}
	return false
}
