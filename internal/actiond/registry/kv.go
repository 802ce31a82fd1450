package registry

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/incusspawn/isx/internal/actiond/store"
)

// KVValue is one value of the key-value store: its row is
// KVValue/<namespace>/<key>.
type KVValue struct {
	Namespace string          `json:"namespace"`
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
}

// Bounds of KV values.
const (
	MaxKVNamespace = 128
	MaxKVKey       = 1024
	MaxKVValue     = 1 << 20
)

var kvNamespace = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// CheckKVNamespace refuses a namespace that could not be told apart from
// its key in the row key: 1 to 128 of A-Z a-z 0-9 _ . -.
func CheckKVNamespace(namespace string) error {
	if len(namespace) == 0 || len(namespace) > MaxKVNamespace || !kvNamespace.MatchString(namespace) {
		return invalid("namespace", "namespace %q must be 1 to %d letters, digits, _, . and -", namespace, MaxKVNamespace)
	}
	return nil
}

// CheckKVKey refuses a key the databases cannot store as it is: empty,
// longer than 1,024 bytes, not UTF-8, or holding a NUL byte.
func CheckKVKey(key string) error {
	switch {
	case len(key) == 0 || len(key) > MaxKVKey:
		return invalid("key", "a key is 1 to %d bytes", MaxKVKey)
	case !utf8.ValidString(key):
		return invalid("key", "a key must be UTF-8")
	case strings.IndexByte(key, 0) >= 0:
		return invalid("key", "a key cannot hold a NUL character")
	}
	return nil
}

func kvRowKey(namespace, key string) string { return namespace + "/" + key }

func checkKV(namespace, key string) error {
	if err := CheckKVNamespace(namespace); err != nil {
		return err
	}
	return CheckKVKey(key)
}

// PutKV writes a value, creating or replacing it. value is any JSON value.
func PutKV(ctx context.Context, w *store.Work, namespace, key string, value json.RawMessage) (*KVValue, error) {
	if err := checkKV(namespace, key); err != nil {
		return nil, err
	}
	if len(value) > MaxKVValue {
		return nil, invalid("value", "the value is %d bytes; at most %d are stored", len(value), MaxKVValue)
	}
	if !json.Valid(value) {
		return nil, invalid("value", "the value is not JSON")
	}
	kv := &KVValue{Namespace: namespace, Key: key, Value: value}
	return kv, put(ctx, w, TableKV, kvRowKey(namespace, key), kv)
}

// GetKV reads a value; a missing one is NOT_FOUND.
func GetKV(ctx context.Context, w *store.Work, namespace, key string) (*KVValue, error) {
	if err := checkKV(namespace, key); err != nil {
		return nil, err
	}
	var kv KVValue
	found, err := get(ctx, w, TableKV, kvRowKey(namespace, key), &kv)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, notFound("key", "no value under %q in namespace %q", key, namespace)
	}
	return &kv, nil
}

// DeleteKV removes a value and returns what it was; a missing one is
// NOT_FOUND.
func DeleteKV(ctx context.Context, w *store.Work, namespace, key string) (*KVValue, error) {
	existing, err := GetKV(ctx, w, namespace, key)
	if err != nil {
		return nil, err
	}
	return existing, w.Delete(ctx, TableKV, kvRowKey(namespace, key))
}

// ListKV lists a namespace's values in key order, after the key `after`
// ("" from the start), at most limit (0: all).
func ListKV(ctx context.Context, w *store.Work, namespace, after string, limit int) ([]*KVValue, error) {
	if err := CheckKVNamespace(namespace); err != nil {
		return nil, err
	}
	prefix := namespace + "/"
	from := ""
	if after != "" {
		from = prefix + after
	}
	rows, err := w.Scan(ctx, TableKV, prefix, from, limit)
	if err != nil {
		return nil, err
	}
	return decodeRows[KVValue](rows)
}
