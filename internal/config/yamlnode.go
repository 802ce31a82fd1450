package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// maxFileSize bounds config.yaml and mcp.yaml; both are a few lines.
const maxFileSize = 1 << 20

// readFile reads a settings file, reporting whether it exists. Any other
// failure is an error naming the file.
func readFile(path string) ([]byte, bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, &Error{Code: CodeInvalid, File: path, Message: "cannot be read: " + err.Error(), Err: err}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, true, &Error{Code: CodeInvalid, File: path, Message: "cannot be read: " + err.Error(), Err: err}
	}
	if len(data) > maxFileSize {
		return nil, true, invalidf(path, 0, "", "is larger than %d bytes, far more than any settings file needs", maxFileSize)
	}
	return data, true, nil
}

// nodeReader walks a YAML tree by hand rather than decoding into structs:
// yaml.v3's type errors do not name the key, and its unknown-field errors
// are free text. Walking the nodes gives every error file, line and key.
type nodeReader struct {
	file string
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// document parses data as one YAML document and returns it (nil when the
// file holds nothing but whitespace and comments) and its root.
func (r *nodeReader) document(data []byte) (*yaml.Node, *yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
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
		return nil, nil, invalidf(r.file, extra.Line, "", "holds more than one YAML document (a second --- line); keep one")
	}
	if len(doc.Content) == 0 || isNull(doc.Content[0]) {
		return &doc, nil, nil
	}
	return &doc, doc.Content[0], nil
}

func (r *nodeReader) syntaxError(err error) *Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	if contains(parserProblems, msg) {
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

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
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

// plain refuses aliases (which could also multiply a small file into a
// huge tree) and tags beyond YAML's own scalar types.
func (r *nodeReader) plain(n *yaml.Node, key string) error {
	if n.Kind == yaml.AliasNode {
		return invalidf(r.file, n.Line, key, "YAML aliases (*%s) are not supported; write the value out", n.Value)
	}
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!str", "!!int", "!!float", "!!bool", "!!null", "!!timestamp":
		default:
			return invalidf(r.file, n.Line, key, "YAML tag %s is not supported; write plain text", n.Tag)
		}
	}
	return nil
}

// mapping calls each for every key of n in order; null is an empty
// mapping. With known set, any other key is an error naming it.
func (r *nodeReader) mapping(n *yaml.Node, key string, known []string, hint func(key string) string, each func(k string, kn, v *yaml.Node) error) error {
	if err := r.plain(n, key); err != nil {
		return err
	}
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return invalidf(r.file, n.Line, key, "must be a mapping of keys to values, not %s", describe(n))
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, v := n.Content[i], n.Content[i+1]
		if kn.Kind != yaml.ScalarNode {
			return invalidf(r.file, kn.Line, key, "a key must be plain text, not %s", describe(kn))
		}
		k := kn.Value
		full := join(key, k)
		if kn.ShortTag() == "!!merge" {
			return invalidf(r.file, kn.Line, full, "merge keys (<<) are not supported; write the keys out")
		}
		if first, dup := seen[k]; dup {
			return invalidf(r.file, kn.Line, full, "key %q appears twice (first on line %d); keep one", k, first)
		}
		seen[k] = kn.Line
		if known != nil && !contains(known, k) {
			msg := fmt.Sprintf("unknown key %q; the keys allowed here are %s", k, strings.Join(sorted(known), ", "))
			if hint != nil {
				if h := hint(k); h != "" {
					msg = fmt.Sprintf("unknown key %q: %s", k, h)
				}
			}
			return invalidf(r.file, kn.Line, full, "%s", msg)
		}
		if err := r.plain(v, full); err != nil {
			return err
		}
		if err := each(k, kn, v); err != nil {
			return err
		}
	}
	return nil
}

// textList returns the items of a list of text; null is an empty list.
func (r *nodeReader) textList(n *yaml.Node, key string) ([]string, error) {
	if err := r.plain(n, key); err != nil {
		return nil, err
	}
	if isNull(n) {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, invalidf(r.file, n.Line, key, "must be a list, like [a, b], not %s", describe(n))
	}
	var out []string
	for i, item := range n.Content {
		k := fmt.Sprintf("%s[%d]", key, i)
		if err := r.plain(item, k); err != nil {
			return nil, err
		}
		if item.Kind != yaml.ScalarNode || isNull(item) {
			return nil, invalidf(r.file, item.Line, k, "must be text, not %s", describe(item))
		}
		out = append(out, item.Value)
	}
	return out, nil
}

// text returns a scalar written as text; null is an error, since an empty
// setting is more likely a slip than a wish for the default.
func (r *nodeReader) text(n *yaml.Node, key string) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", invalidf(r.file, n.Line, key, "must be text, not %s", describe(n))
	}
	if isNull(n) || n.Value == "" {
		return "", invalidf(r.file, n.Line, key, "has no value; give one or delete the line")
	}
	return n.Value, nil
}

var decimal = regexp.MustCompile(`^[0-9]+$`)

// count returns a non-negative whole number between min and max.
func (r *nodeReader) count(n *yaml.Node, key string, min, max int) (int, error) {
	if n.Kind != yaml.ScalarNode {
		return 0, invalidf(r.file, n.Line, key, "must be a whole number, not %s", describe(n))
	}
	if isNull(n) {
		return 0, invalidf(r.file, n.Line, key, "has no value; give a whole number or delete the line for the default")
	}
	tag := n.ShortTag()
	switch {
	case tag == "!!int" && strings.HasPrefix(n.Value, "-"):
		return 0, invalidf(r.file, n.Line, key, "must not be negative, not %s", n.Value)
	case tag == "!!int" && !decimal.MatchString(n.Value):
		return 0, invalidf(r.file, n.Line, key, "write %q as a plain decimal number", n.Value)
	case tag != "!!int" && !(tag == "!!float" && decimal.MatchString(n.Value)):
		// A float tag on plain digits is yaml.v3's answer to an integer
		// too large for int64.
		return 0, invalidf(r.file, n.Line, key, "must be a whole number, not %q", n.Value)
	}
	v, err := strconv.Atoi(n.Value)
	if err != nil || v > max {
		return 0, invalidf(r.file, n.Line, key, "%s is too large; the most isx accepts is %d", n.Value, max)
	}
	if v < min {
		return 0, invalidf(r.file, n.Line, key, "must be at least %d, not %d", min, v)
	}
	return v, nil
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
