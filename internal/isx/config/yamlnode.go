package config

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/incusspawn/isx/internal/isx/yamltree"
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
		return nil, true, unusable(path, "cannot be read", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, true, unusable(path, "cannot be read", err)
	}
	if len(data) > maxFileSize {
		return nil, true, invalidf(path, 0, "", "is larger than %d bytes, far more than any settings file needs", maxFileSize)
	}
	return data, true, nil
}

// nodeReader reads config.yaml and mcp.yaml with yamltree, so every error
// names file, line and key, and is this package's *Error.
type nodeReader struct {
	yamltree.Reader
}

func newReader(file string) *nodeReader {
	return &nodeReader{yamltree.Reader{File: file, NewError: fromTree}}
}

func fromTree(e *yamltree.Error) error {
	e.Code = CodeInvalid
	return &Error{*e}
}

// textList returns the items of a list of text; null is an empty list.
func (r *nodeReader) textList(n *yaml.Node, key string) ([]string, error) {
	if n.Kind != yaml.SequenceNode && !yamltree.IsNull(n) {
		return nil, invalidf(r.File, n.Line, key, "must be a list, like [a, b], not %s", yamltree.Describe(n))
	}
	items, err := r.List(n, key)
	if err != nil {
		return nil, err
	}
	var out []string
	for i, item := range items {
		if item.Kind != yaml.ScalarNode || yamltree.IsNull(item) {
			return nil, invalidf(r.File, item.Line, yamltree.Index(key, i), "must be text, not %s", yamltree.Describe(item))
		}
		out = append(out, item.Value)
	}
	return out, nil
}

// text is Text refusing null and "", since an empty setting is more
// likely a slip than a wish for the default.
func (r *nodeReader) text(n *yaml.Node, key string) (string, error) {
	s, err := r.Text(n, key)
	if err == nil && s == "" {
		return "", invalidf(r.File, n.Line, key, "has no value; give one or delete the line")
	}
	return s, err
}

var decimal = regexp.MustCompile(`^[0-9]+$`)

// count returns a non-negative whole number between min and max.
func (r *nodeReader) count(n *yaml.Node, key string, min, max int) (int, error) {
	if n.Kind != yaml.ScalarNode {
		return 0, invalidf(r.File, n.Line, key, "must be a whole number, not %s", yamltree.Describe(n))
	}
	if yamltree.IsNull(n) {
		return 0, invalidf(r.File, n.Line, key, "has no value; give a whole number or delete the line for the default")
	}
	tag := n.ShortTag()
	switch {
	case tag == "!!int" && strings.HasPrefix(n.Value, "-"):
		return 0, invalidf(r.File, n.Line, key, "must not be negative, not %s", n.Value)
	case tag == "!!int" && !decimal.MatchString(n.Value):
		return 0, invalidf(r.File, n.Line, key, "write %q as a plain decimal number", n.Value)
	case tag != "!!int" && !(tag == "!!float" && decimal.MatchString(n.Value)):
		// A float tag on plain digits is yaml.v3's answer to an integer
		// too large for int64.
		return 0, invalidf(r.File, n.Line, key, "must be a whole number, not %q", n.Value)
	}
	v, err := strconv.Atoi(n.Value)
	if err != nil || v > max {
		return 0, invalidf(r.File, n.Line, key, "%s is too large; the most isx accepts is %d", n.Value, max)
	}
	if v < min {
		return 0, invalidf(r.File, n.Line, key, "must be at least %d, not %d", min, v)
	}
	return v, nil
}

func contains(list []string, s string) bool {
	return slices.Contains(list, s)
}
