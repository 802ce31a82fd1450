package task

import (
	"encoding/base32"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// Task ids are "t-" and ten characters of lowercase base32: 50 random bits,
// short enough to read aloud, safe in a URL, a file name and a unit name.
var (
	idPattern      = regexp.MustCompile(`^t-[a-z2-7]{10}$`)
	keyPattern     = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)
	envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
)

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// NewID draws a task id from random.
func NewID(random io.Reader) (string, error) {
	raw := make([]byte, 7) // 56 bits; the first 50 are used
	if _, err := io.ReadFull(random, raw); err != nil {
		return "", fmt.Errorf("task: reading random bits for a task id: %w", err)
	}
	return "t-" + strings.ToLower(idEncoding.EncodeToString(raw)[:10]), nil
}

// ValidateID refuses anything that is not a task id. Every id that comes
// from outside is checked with it before it reaches an instance.
func ValidateID(id string) error {
	if !idPattern.MatchString(id) {
		return newError(CodeInvalidArgument, "", "", "%q is not a task id: task ids are t- followed by ten characters of a-z and 2-7", Clip(id, 40))
	}
	return nil
}

// ValidateKey refuses an idempotency key that is not 1 to 64 characters of
// A-Za-z0-9._:- (ISX-156, ISX-157).
func ValidateKey(key string) error {
	if !keyPattern.MatchString(key) {
		return newError(CodeInvalidArgument, "", "", "idempotency key %q is not allowed: use 1 to 64 characters of A-Z, a-z, 0-9, '.', '_', ':' and '-'", Clip(key, 80))
	}
	return nil
}
