package action

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// URITemplate is an mcp.resources template: literal text and simple
// variables, {name}. Each variable matches one or more characters,
// percent-decoded (ACT-264, ACT-265). Operators of RFC 6570 ({+x}, {/x}, …)
// are not supported, nor two variables side by side, whose split would be
// ambiguous.
type URITemplate struct {
	text      string
	variables []string
	pattern   *regexp.Regexp
}

var variableName = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// ParseURITemplate parses a template such as "twisp://accounts/{account_id}".
func ParseURITemplate(text string) (*URITemplate, error) {
	if strings.TrimSpace(text) == "" {
		return nil, fmt.Errorf("the URI template is empty")
	}
	var pattern strings.Builder
	pattern.WriteString("^")
	t := &URITemplate{text: text}
	rest := text
	lastWasVariable := false
	for rest != "" {
		open := strings.IndexByte(rest, '{')
		closing := strings.IndexByte(rest, '}')
		if open < 0 {
			if closing >= 0 {
				return nil, fmt.Errorf("the URI template %q has a } without a {", text)
			}
			pattern.WriteString(regexp.QuoteMeta(rest))
			break
		}
		if closing >= 0 && closing < open {
			return nil, fmt.Errorf("the URI template %q has a } without a {", text)
		}
		if open > 0 {
			pattern.WriteString(regexp.QuoteMeta(rest[:open]))
			lastWasVariable = false
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return nil, fmt.Errorf("the URI template %q has a { without a }", text)
		}
		name := rest[open+1 : open+end]
		if !variableName.MatchString(name) {
			return nil, fmt.Errorf("the URI template %q has the variable {%s}: only simple variables of letters, digits and _ are supported", text, name)
		}
		if slices.Contains(t.variables, name) {
			return nil, fmt.Errorf("the URI template %q uses {%s} twice", text, name)
		}
		if lastWasVariable {
			return nil, fmt.Errorf("the URI template %q has two variables side by side: separate them with literal text", text)
		}
		t.variables = append(t.variables, name)
		pattern.WriteString("(.+?)")
		lastWasVariable = true
		rest = rest[open+end+1:]
	}
	pattern.WriteString("$")
	compiled, err := regexp.Compile(pattern.String())
	if err != nil {
		return nil, fmt.Errorf("the URI template %q: %w", text, err)
	}
	t.pattern = compiled
	return t, nil
}

// String is the template's text.
func (t *URITemplate) String() string { return t.text }

// Variables are the template's variable names, in order.
func (t *URITemplate) Variables() []string { return slices.Clone(t.variables) }

// Match reports whether uri matches the template, with each variable's
// percent-decoded value (ACT-263..266).
func (t *URITemplate) Match(uri string) (map[string]string, bool) {
	parts := t.pattern.FindStringSubmatch(uri)
	if parts == nil {
		return nil, false
	}
	values := make(map[string]string, len(t.variables))
	for i, name := range t.variables {
		value, err := url.PathUnescape(parts[i+1])
		if err != nil || value == "" {
			return nil, false
		}
		values[name] = value
	}
	return values, true
}
