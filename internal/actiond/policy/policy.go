// Package policy evaluates the platform's ALLOW/DENY policies: wildcard
// matching of operations and resources, CEL assertions, layers that narrow
// one another (principal, server, tool), the denial a caller reports, and the
// MCP tool annotations derived from policies.
package policy

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/incusspawn/isx/internal/coded"
)

// Effect is ALLOW or DENY.
type Effect string

const (
	Allow Effect = "ALLOW"
	Deny  Effect = "DENY"
)

// Operations the platform names. Policies may name others and wildcards.
const (
	Select  = "SELECT"
	Insert  = "INSERT"
	Update  = "UPDATE"
	Delete  = "DELETE"
	Invoke  = "INVOKE"
	Respond = "RESPOND"
)

// Policy allows or denies operations on resources. Actions and Resources are
// patterns matched against the whole operation or resource name, where `*`
// matches any run of characters (also none) and `?` exactly one.
//
// Assertions are named CEL boolean expressions over `context.auth.claims`
// and `context.document`; the policy applies only when every one is true.
// A false assertion skips the policy; an assertion that fails to evaluate
// also skips it, and the failure is reported (Decision.AssertionErrors and
// the denial's Detail).
type Policy struct {
	Effect     Effect            `json:"effect"`
	Actions    []string          `json:"actions"`
	Resources  []string          `json:"resources"`
	Assertions map[string]string `json:"assertions,omitempty"`
}

// CodeInvalid is the GraphQL error code of an invalid policy.
const CodeInvalid = "BAD_REQUEST"

// InvalidError is a policy that cannot be stored. Path is relative to the
// policy list, such as "[2].assertions.owner".
type InvalidError struct {
	coded.Base
	Index int
	Field string // "effect", "actions", "resources", "assertions.<name>"
}

func invalid(index int, field string, cause error, format string, args ...any) *InvalidError {
	return &InvalidError{Base: coded.Base{Code: CodeInvalid, Message: fmt.Sprintf(format, args...), Err: cause}, Index: index, Field: field}
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("policies[%d].%s: %s", e.Index, e.Field, e.Message)
}

// Path is the field path inside the policy list, such as "[2].actions[0]".
func (e *InvalidError) Path() string { return fmt.Sprintf("[%d].%s", e.Index, e.Field) }

// Validate checks every policy: a known effect, at least one action and one
// resource, no empty or blank pattern, and assertions that compile to bool.
func Validate(policies []Policy) error {
	for i, p := range policies {
		if p.Effect != Allow && p.Effect != Deny {
			return invalid(i, "effect", nil, "effect %q must be ALLOW or DENY", p.Effect)
		}
		if err := validatePatterns(i, "actions", p.Actions); err != nil {
			return err
		}
		if err := validatePatterns(i, "resources", p.Resources); err != nil {
			return err
		}
		names := slices.Sorted(maps.Keys(p.Assertions))
		for _, name := range names {
			if strings.TrimSpace(name) == "" {
				return invalid(i, "assertions", nil, "an assertion needs a name")
			}
			if _, err := compileAssertion(p.Assertions[name]); err != nil {
				return invalid(i, "assertions."+name, err, "%s", err.Error())
			}
		}
	}
	return nil
}

func validatePatterns(index int, field string, patterns []string) error {
	if len(patterns) == 0 {
		return invalid(index, field, nil, "a policy needs at least one entry in %s", field)
	}
	for j, pattern := range patterns {
		if strings.TrimSpace(pattern) == "" || pattern != strings.TrimSpace(pattern) {
			return invalid(index, fmt.Sprintf("%s[%d]", field, j), nil, "%q is not a valid pattern: it is empty or has surrounding spaces", pattern)
		}
	}
	return nil
}

// Match reports whether pattern matches all of name; `*` matches any run of
// characters, `?` one character. Matching is case-sensitive.
func Match(pattern, name string) bool {
	if pattern == "*" || pattern == name {
		return true
	}
	if !strings.ContainsAny(pattern, "*?") {
		return false
	}
	return glob(pattern, name)
}

// glob is the linear-time greedy wildcard match with one backtrack point.
func glob(pattern, name string) bool {
	p, n := []rune(pattern), []rune(name)
	pi, ni := 0, 0
	star, mark := -1, 0
	for ni < len(n) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == n[ni]):
			pi++
			ni++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, ni
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			ni = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

func matchAny(patterns []string, name string) bool {
	for _, pattern := range patterns {
		if Match(pattern, name) {
			return true
		}
	}
	return false
}
