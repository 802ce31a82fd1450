package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Settings every process on one database must agree on.
const (
	// SettingPublicURL is the public URL the last `actiond serve` on this
	// database was started with: the issuer of its tokens, which
	// `actiond token` signs as.
	SettingPublicURL = "public_url"
)

// PutSetting stores a setting and returns the value it replaced ("" when it
// was not set).
func (s *Store) PutSetting(ctx context.Context, name, value string) (string, error) {
	var previous string
	err := s.Write(ctx, func(tx *Tx) error {
		previous = ""
		err := tx.queryRow(ctx, "SELECT value FROM settings WHERE name = ?", name).Scan(&previous)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("store: read setting %s: %w", name, err)
		}
		_, err = tx.exec(ctx, `INSERT INTO settings (name, value, updated_at) VALUES (?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`, name, value, micros(tx.now))
		if err != nil {
			return fmt.Errorf("store: save setting %s: %w", name, err)
		}
		return nil
	})
	return previous, err
}

// Setting reads a setting; ok is false when it was never set.
func (s *Store) Setting(ctx context.Context, name string) (value string, ok bool, err error) {
	err = s.reader.QueryRowContext(ctx, rebind(s.dialect, "SELECT value FROM settings WHERE name = ?"), name).Scan(&value)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("store: read setting %s: %w", name, err)
	}
	return value, true, nil
}
