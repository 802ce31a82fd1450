package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
)

// Row is one business record: a JSON value under a table and key, with the
// version its last write gave it.
type Row struct {
	Table   string          `json:"table"`
	Key     string          `json:"key"`
	Value   json.RawMessage `json:"value"`
	Version int64           `json:"version"`
}

// Row reads one row. ok is false when it does not exist.
func (tx *Tx) Row(ctx context.Context, account, table, key string) (row Row, ok bool, err error) {
	row = Row{Table: table, Key: key}
	var value string
	err = tx.queryRow(ctx, "SELECT value, version FROM rows WHERE account = ? AND tbl = ? AND key = ?",
		account, table, key).Scan(&value, &row.Version)
	if errors.Is(err, sql.ErrNoRows) {
		return Row{}, false, nil
	}
	if err != nil {
		return Row{}, false, fmt.Errorf("store: read %s %q: %w", table, key, err)
	}
	row.Value = json.RawMessage(value)
	return row, true, nil
}

// Rows lists rows of a table whose key starts with prefix, in key order,
// after the key `after` (exclusive), at most limit of them (0: no limit).
func (tx *Tx) Rows(ctx context.Context, account, table, prefix, after string, limit int) ([]Row, error) {
	query := "SELECT key, value, version FROM rows WHERE account = ? AND tbl = ? AND key >= ? AND key > ?"
	args := []any{account, table, prefix, after}
	if prefix != "" {
		query += " AND key < ?"
		args = append(args, prefixEnd(prefix))
	}
	query += " ORDER BY key"
	if limit > 0 {
		query += fmt.Sprintf(" LIMIT %d", limit)
	}
	rows, err := tx.query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list %s: %w", table, err)
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		r := Row{Table: table}
		var value string
		if err := rows.Scan(&r.Key, &value, &r.Version); err != nil {
			return nil, fmt.Errorf("store: list %s: %w", table, err)
		}
		r.Value = json.RawMessage(value)
		out = append(out, r)
	}
	return out, rows.Err()
}

// prefixEnd is the smallest string greater than every string with the prefix.
func prefixEnd(prefix string) string {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return "\xff\xff\xff\xff"
}

// PutRow writes a row only if its version is still expect (0: the row must
// not exist yet), returning the new version. A mismatch is ErrConflict.
func (tx *Tx) PutRow(ctx context.Context, account, table, key string, value json.RawMessage, expect int64) (int64, error) {
	now := micros(tx.now)
	if expect == 0 {
		// ON CONFLICT keeps a Postgres transaction usable after a clash.
		res, err := tx.exec(ctx, "INSERT INTO rows (account, tbl, key, value, version, updated_at) VALUES (?, ?, ?, ?, 1, ?) ON CONFLICT DO NOTHING",
			account, table, key, string(value), now)
		if err != nil {
			return 0, fmt.Errorf("store: write %s %q: %w", table, key, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return 0, fmt.Errorf("%w: %s %q already exists", ErrConflict, table, key)
		}
		return 1, nil
	}
	res, err := tx.exec(ctx, "UPDATE rows SET value = ?, version = version + 1, updated_at = ? WHERE account = ? AND tbl = ? AND key = ? AND version = ?",
		string(value), now, account, table, key, expect)
	if err != nil {
		return 0, fmt.Errorf("store: write %s %q: %w", table, key, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return 0, fmt.Errorf("%w: %s %q", ErrConflict, table, key)
	}
	return expect + 1, nil
}

// DeleteRow deletes a row only if its version is still expect.
func (tx *Tx) DeleteRow(ctx context.Context, account, table, key string, expect int64) error {
	res, err := tx.exec(ctx, "DELETE FROM rows WHERE account = ? AND tbl = ? AND key = ? AND version = ?",
		account, table, key, expect)
	if err != nil {
		return fmt.Errorf("store: delete %s %q: %w", table, key, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("%w: %s %q", ErrConflict, table, key)
	}
	return nil
}
