package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// localKeyID names the one signing key of actiond's local issuer.
const localKeyID = "local"

// LoadSigningKey reads the local issuer's key, so that every actiond process
// on one database signs and verifies with the same key.
func (s *Store) LoadSigningKey(ctx context.Context) ([]byte, bool, error) {
	var jwk string
	err := s.reader.QueryRowContext(ctx, rebind(s.dialect, "SELECT jwk FROM signing_keys WHERE id = ?"), localKeyID).Scan(&jwk)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("store: read signing key: %w", err)
	}
	return []byte(jwk), true, nil
}

// SaveSigningKey stores the key unless one is stored already, and returns the
// stored one: two processes starting at once agree on the first.
func (s *Store) SaveSigningKey(ctx context.Context, jwk []byte) ([]byte, error) {
	var stored []byte
	err := s.Write(ctx, func(tx *Tx) error {
		_, err := tx.exec(ctx, "INSERT INTO signing_keys (id, jwk, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
			localKeyID, string(jwk), micros(tx.now))
		if err != nil {
			return fmt.Errorf("store: save signing key: %w", err)
		}
		var current string
		if err := tx.queryRow(ctx, "SELECT jwk FROM signing_keys WHERE id = ?", localKeyID).Scan(&current); err != nil {
			return fmt.Errorf("store: save signing key: %w", err)
		}
		stored = []byte(current)
		return nil
	})
	return stored, err
}
