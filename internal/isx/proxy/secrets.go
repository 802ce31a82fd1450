package proxy

import (
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/incusspawn/isx/internal/coded"
)

// secretBytes is the entropy of an instance secret (hex-encoded in the
// instance).
const secretBytes = 32

// secretRecord is the secret of one instance incarnation. The proxy
// keeps them in a file only the user can read, so that a restarted proxy
// (even after kill -9) goes on accepting the secrets instances hold,
// rather than rotating them under running agents.
type secretRecord struct {
	Incarnation string `json:"incarnation"`
	Secret      string `json:"secret"`
}

// secretBook is the file of secret records, by instance name.
type secretBook struct {
	path    string
	records map[string]secretRecord
}

func loadSecrets(dir string) (*secretBook, error) {
	path := filepath.Join(dir, "secrets.json")
	book := &secretBook{path: path, records: map[string]secretRecord{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return book, nil
	}
	if err != nil {
		return nil, coded.Wrap(CodeState, err, "the proxy's record of instance secrets %s cannot be read", path)
	}
	if err := json.Unmarshal(data, &book.records); err != nil {
		// Rotating every secret is the safe recovery: each instance gets a
		// new one at its next admission.
		return &secretBook{path: path, records: map[string]secretRecord{}}, nil
	}
	return book, nil
}

// secretFor is the secret of the incarnation, and whether it is new.
func (b *secretBook) secretFor(name, incarnation string, random io.Reader) (string, bool, error) {
	if r, ok := b.records[name]; ok && r.Incarnation == incarnation && r.Secret != "" {
		return r.Secret, false, nil
	}
	raw := make([]byte, secretBytes)
	if _, err := io.ReadFull(random, raw); err != nil {
		return "", false, fmt.Errorf("making an instance secret: %w", err)
	}
	secret := hex.EncodeToString(raw)
	b.records[name] = secretRecord{Incarnation: incarnation, Secret: secret}
	return secret, true, nil
}

func (b *secretBook) forget(name string) { delete(b.records, name) }

func (b *secretBook) save() error {
	data, err := json.Marshal(b.records)
	if err != nil {
		return fmt.Errorf("encoding the instance secrets: %w", err)
	}
	return writePrivate(b.path, data)
}

// sameSecret compares in constant time.
func sameSecret(given, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(given), []byte(want)) == 1
}
