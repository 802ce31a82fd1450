// Package yamltree reads a YAML document as a tree of nodes, walked by hand
// rather than decoded into structs: yaml.v3's KnownFields reports an
// unknown key only as free text, its type errors do not name the key, and
// Node.Decode drops KnownFields inside custom unmarshalers. Walking the
// nodes gives every error its file, line and full key path.
package yamltree

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/spelling"
)

// Reader reads the nodes of one file. Its zero value, with File set,
// returns *Error; NewError lets a package return its own error type.
type Reader struct {
	// File names the file in every error.
	File string
	// SecondDocument says what to do when the file holds more than one
	// document; "keep one" when empty.
	SecondDocument string
	// Hint, when set, explains an unknown key (a retired setting, say)
	// instead of listing the keys allowed; "" falls back to the list.
	Hint func(key string) string
	// NewError turns each problem found into the caller's error type.
	NewError func(*Error) error
	// Meant maps keys people write by mistake ("steps") to the keys they
	// usually mean ("run"), for an unknown key that no allowed key is
	// spelt near; a meant key is suggested only where it is allowed.
	Meant map[string][]string
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// Document parses data as exactly one YAML document. doc is nil when data
// holds none (nothing, or only comments); root is nil as well when the
// document is empty or null, leaving doc for the caller to edit in place.
func (r *Reader) Document(data []byte) (doc, root *yaml.Node, err error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var first yaml.Node
	if err := dec.Decode(&first); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil, nil
		}
		return nil, nil, r.syntaxError(err)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, nil, r.syntaxError(err)
	default:
		advice := r.SecondDocument
		if advice == "" {
			advice = "keep one"
		}
		return nil, nil, r.fail(extra.Line, "", "holds more than one YAML document (a second --- line); %s", advice)
	}
	if len(first.Content) == 0 || IsNull(first.Content[0]) {
		return &first, nil, nil
	}
	return &first, first.Content[0], nil
}

func (r *Reader) syntaxError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	switch {
	case slices.Contains(parserProblems, msg):
		// yaml.v3 reports a parser error's 0-based line as it is (it adds
		// one only for scanner errors), and omits it for the first line.
		line++
	case line == 0:
		// A scanner error on the first line comes without a line number.
		line = 1
	}
	return r.wrap(&Error{Base: coded.Base{Message: "is not valid YAML: " + msg, Err: err}, Place: Place{File: r.File, Line: line}})
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

// plain refuses what this reader does not follow: aliases (which could
// also multiply a small file into a huge tree) and tags beyond YAML's own
// scalar types.
func (r *Reader) plain(n *yaml.Node, key string) error {
	if n.Kind == yaml.AliasNode {
		return r.fail(n.Line, key, "YAML aliases (*%s) are not supported; write the value out", n.Value)
	}
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!str", "!!int", "!!float", "!!bool", "!!null", "!!timestamp":
		default:
			return r.fail(n.Line, key, "YAML tag %s is not supported; write plain text", n.Tag)
		}
	}
	return nil
}

// Mapping calls each for every key of n in order, after refusing its
// value if it is an alias or tagged. Null is an empty mapping. Keys
// outside known (when known is not nil), repeated keys and merge keys are
// errors that name the key and its line.
func (r *Reader) Mapping(n *yaml.Node, key string, known []string, each func(name string, k, v *yaml.Node) error) error {
	if err := r.plain(n, key); err != nil {
		return err
	}
	if IsNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return r.fail(n.Line, key, "must be a mapping of keys to values, not %s", Describe(n))
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return r.fail(k.Line, key, "a key must be plain text, not %s", Describe(k))
		}
		name, full := k.Value, Join(key, k.Value)
		if k.ShortTag() == "!!merge" {
			return r.fail(k.Line, full, "merge keys (<<) are not supported; write the keys out")
		}
		if first, dup := seen[name]; dup {
			return r.fail(k.Line, full, "key %q appears twice (first on line %d); keep one", name, first)
		}
		seen[name] = k.Line
		if known != nil && !slices.Contains(known, name) {
			return r.fail(k.Line, full, "%s", r.unknown(name, known))
		}
		if err := r.plain(v, full); err != nil {
			return err
		}
		if err := each(name, k, v); err != nil {
			return err
		}
	}
	return nil
}

func (r *Reader) unknown(name string, known []string) string {
	if r.Hint != nil {
		if hint := r.Hint(name); hint != "" {
			return fmt.Sprintf("unknown key %q: %s", name, hint)
		}
	}
	allowed := slices.Sorted(slices.Values(known))
	if meant := r.meant(name, known); meant != "" {
		return fmt.Sprintf("unknown key %q (did you mean %s?); the keys allowed here are %s", name, meant, strings.Join(allowed, ", "))
	}
	return fmt.Sprintf("unknown key %q; the keys allowed here are %s", name, strings.Join(allowed, ", "))
}

// meant is the allowed key an unknown one most likely stands for: one
// spelt near it, else one that Meant lists for it.
func (r *Reader) meant(name string, known []string) string {
	if near := spelling.Nearest(name, known); near != "" {
		return near
	}
	for _, key := range r.Meant[strings.ToLower(name)] {
		if slices.Contains(known, key) {
			return key
		}
	}
	return ""
}

// List returns the items of a list, each refused if it is an alias or
// tagged; null is an empty list.
func (r *Reader) List(n *yaml.Node, key string) ([]*yaml.Node, error) {
	if err := r.plain(n, key); err != nil {
		return nil, err
	}
	if IsNull(n) {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, r.fail(n.Line, key, "must be a list, not %s", Describe(n))
	}
	for i, item := range n.Content {
		if err := r.plain(item, Index(key, i)); err != nil {
			return nil, err
		}
	}
	return n.Content, nil
}

// Text returns a scalar's text as written; null is "". Numbers and
// booleans are taken as the text they were written as.
func (r *Reader) Text(n *yaml.Node, key string) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", r.fail(n.Line, key, "must be text, not %s", Describe(n))
	}
	if IsNull(n) {
		return "", nil
	}
	return n.Value, nil
}

// IsNull reports whether n is YAML's null: empty, ~ or null.
func IsNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// Describe names what n is, for a message like "must be text, not a list".
func Describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		if IsNull(n) {
			return "empty"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "something else"
}

// Join is the path of key inside parent ("" for the document's root).
func Join(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// Index is the path of a list's i-th item.
func Index(key string, i int) string {
	return fmt.Sprintf("%s[%d]", key, i)
}
