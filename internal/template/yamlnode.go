package template

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// nodeReader walks a parsed YAML tree by hand instead of decoding into
// structs: yaml.v3's KnownFields reports an unknown key only as free text,
// its type errors do not name the key, and Node.Decode drops KnownFields
// inside custom unmarshalers (needed for the `run` shorthand). Walking the
// nodes gives every error its file, line and full field path.
type nodeReader struct {
	file string
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// document parses data as exactly one YAML document and returns its root,
// or nil for a file with no content.
func (r *nodeReader) document(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, r.syntaxError(err)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, r.syntaxError(err)
	default:
		return nil, invalidf(r.file, extra.Line, "", "holds more than one YAML document; put each template in a file of its own")
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if isNull(root) {
		return nil, nil
	}
	return root, nil
}

func (r *nodeReader) syntaxError(err error) *Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	if parserProblem(msg) {
		// yaml.v3 reports a parser error's 0-based line as it is (it adds
		// one only for scanner errors), and omits it for the first line.
		line++
	}
	return &Error{Code: CodeInvalid, File: r.file, Line: line, Message: "is not valid YAML: " + msg, Err: err}
}

// parserProblems are the messages of yaml.v3's parser (not its scanner).
var parserProblems = []string{
	"did not find expected <stream-start>",
	"did not find expected <document start>",
	"did not find expected node content",
	"did not find expected '-' indicator",
	"did not find expected key",
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"found undefined tag handle",
	"found duplicate %TAG directive",
	"found duplicate %YAML directive",
	"found incompatible YAML document",
}

func parserProblem(msg string) bool {
	return contains(parserProblems, msg)
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		if isNull(n) {
			return "empty"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "something else"
}

func join(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func index(field string, i int) string {
	return fmt.Sprintf("%s[%d]", field, i)
}

// plain refuses what this reader does not follow: aliases (which could
// also multiply a small file into a huge tree) and custom tags.
func (r *nodeReader) plain(n *yaml.Node, field string) error {
	if n.Kind == yaml.AliasNode {
		return invalidf(r.file, n.Line, field, "YAML aliases (*%s) are not supported; write the value out", n.Value)
	}
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!str", "!!int", "!!float", "!!bool", "!!null", "!!timestamp":
		default:
			return invalidf(r.file, n.Line, field, "YAML tag %s is not supported; write plain text", n.Tag)
		}
	}
	return nil
}

// mapping calls each for every key of n in order. A null node is an empty
// mapping. Keys outside known (when known is not nil), repeated keys and
// merge keys are errors that name the key and its line.
func (r *nodeReader) mapping(n *yaml.Node, field string, known []string, each func(key string, k, v *yaml.Node) error) error {
	if err := r.plain(n, field); err != nil {
		return err
	}
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		what := field
		if what == "" {
			what = "the file"
		}
		return invalidf(r.file, n.Line, field, "must be a mapping of keys to values, not %s (%s)", describe(n), what)
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return invalidf(r.file, k.Line, field, "a key must be plain text, not %s", describe(k))
		}
		key := k.Value
		if k.ShortTag() == "!!merge" {
			return invalidf(r.file, k.Line, join(field, key), "merge keys (<<) are not supported; write the keys out")
		}
		if first, dup := seen[key]; dup {
			return invalidf(r.file, k.Line, join(field, key), "key %q appears twice (first on line %d); keep one", key, first)
		}
		seen[key] = k.Line
		if known != nil && !contains(known, key) {
			return invalidf(r.file, k.Line, join(field, key), "unknown key %q; the keys allowed here are %s", key, strings.Join(sorted(known), ", "))
		}
		if err := r.plain(v, join(field, key)); err != nil {
			return err
		}
		if err := each(key, k, v); err != nil {
			return err
		}
	}
	return nil
}

// sequence returns the items of a list; a null node is an empty list.
func (r *nodeReader) sequence(n *yaml.Node, field string) ([]*yaml.Node, error) {
	if isNull(n) {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, invalidf(r.file, n.Line, field, "must be a list, not %s", describe(n))
	}
	for i, item := range n.Content {
		if err := r.plain(item, index(field, i)); err != nil {
			return nil, err
		}
	}
	return n.Content, nil
}

// text returns a scalar's text as written; null is "". Numbers and
// booleans are taken as the text they were written as.
func (r *nodeReader) text(n *yaml.Node, field string) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", invalidf(r.file, n.Line, field, "must be text, not %s", describe(n))
	}
	if isNull(n) {
		return "", nil
	}
	return n.Value, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func sorted(list []string) []string {
	out := append([]string(nil), list...)
	sort.Strings(out)
	return out
}
