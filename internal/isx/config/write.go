package config

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"go.yaml.in/yaml/v3"
)

// writeAtomic replaces path with data so that a reader sees the old file
// or the new one, never a part: a temporary file in the same directory,
// synced, then renamed over it. The file is 0600 and a directory it has to
// create is 0700. A symlinked settings file (a dotfile manager's, say) is
// replaced at its target, so the link survives.
func writeAtomic(path string, data []byte) error {
	fail := func(err error) error {
		return unusable(path, "cannot be written", err)
	}
	if target, err := filepath.EvalSymlinks(path); err == nil {
		path = target
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fail(err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fail(err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fail(err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(0o600); err != nil {
		return fail(err)
	}
	if _, err := tmp.Write(data); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fail(err)
	}
	done = true
	// The rename is durable only once the directory is synced; a failure
	// here leaves the new file in place, so it is not reported.
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

func encode(doc *yaml.Node) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func newDocument() *yaml.Node {
	return &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode, Tag: "!!map"}}}
}

func textNode(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

func listNode(items []string, flow bool) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	if flow {
		n.Style = yaml.FlowStyle
	}
	for _, s := range items {
		n.Content = append(n.Content, textNode(s))
	}
	return n
}

// lookup returns the index of key's key node in a mapping, or -1.
func lookup(mapping *yaml.Node, key string) int {
	for i := 0; i+1 < len(mapping.Content); i += 2 {
		if mapping.Content[i].Value == key {
			return i
		}
	}
	return -1
}

// setValue puts value under key, keeping the key node (and its comments)
// when the key is already there, and the old value's line comment.
func setValue(mapping *yaml.Node, key string, value *yaml.Node) {
	if i := lookup(mapping, key); i >= 0 {
		keyNode, old := mapping.Content[i], mapping.Content[i+1]
		if value.LineComment == "" {
			value.LineComment = old.LineComment
		}
		// After `key:` with nothing else on the line, yaml.v3 keeps the
		// comment on the key, and would write it a line late once the value
		// sits on that line.
		if oneLine(value) && value.LineComment == "" {
			value.LineComment, keyNode.LineComment = keyNode.LineComment, ""
		}
		mapping.Content[i+1] = value
		return
	}
	mapping.Content = append(mapping.Content, textNode(key), value)
}

func oneLine(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode || n.Style&yaml.FlowStyle != 0
}

func removeKey(mapping *yaml.Node, key string) {
	if i := lookup(mapping, key); i >= 0 {
		mapping.Content = append(mapping.Content[:i], mapping.Content[i+2:]...)
	}
}
