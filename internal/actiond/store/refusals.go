package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// RefusalKey is who was refused where: refusals are throttled per principal
// and subject at a server, so users sharing a principal never hide one
// another's refusals.
type RefusalKey struct {
	Account   string
	ServerID  string
	Principal string
	Subject   string
}

// RefusalNote says whether to record a refusal, and what the recorded one
// must say of the refusals counted but not recorded before it.
type RefusalNote struct {
	Record bool
	// Unrecorded counts the refusals since the previous recorded one.
	Unrecorded int
	// Window is when the previous window opened; zero for the first refusal.
	Window time.Time
}

// NoteRefusal counts a refusal. The first in a window of length `window`
// is recorded and opens the window; later ones in it are only counted.
func (tx *Tx) NoteRefusal(ctx context.Context, key RefusalKey, window time.Duration) (RefusalNote, error) {
	var start int64
	var unrecorded int
	suffix := ""
	if tx.dialect == Postgres {
		suffix = " FOR UPDATE"
	}
	err := tx.queryRow(ctx, "SELECT window_start, unrecorded FROM refusal_windows WHERE account = ? AND server_id = ? AND principal = ? AND subject = ?"+suffix,
		key.Account, key.ServerID, key.Principal, key.Subject).Scan(&start, &unrecorded)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		_, err = tx.exec(ctx, `INSERT INTO refusal_windows (account, server_id, principal, subject, window_start, unrecorded)
			VALUES (?, ?, ?, ?, ?, 0) ON CONFLICT DO NOTHING`, key.Account, key.ServerID, key.Principal, key.Subject, micros(tx.now))
		if err != nil {
			return RefusalNote{}, fmt.Errorf("store: note refusal: %w", err)
		}
		return RefusalNote{Record: true}, nil
	case err != nil:
		return RefusalNote{}, fmt.Errorf("store: note refusal: %w", err)
	}
	opened := fromMicros(start)
	if tx.now.Before(opened.Add(window)) {
		_, err = tx.exec(ctx, `UPDATE refusal_windows SET unrecorded = unrecorded + 1
			WHERE account = ? AND server_id = ? AND principal = ? AND subject = ?`, key.Account, key.ServerID, key.Principal, key.Subject)
		if err != nil {
			return RefusalNote{}, fmt.Errorf("store: note refusal: %w", err)
		}
		return RefusalNote{Record: false}, nil
	}
	_, err = tx.exec(ctx, `UPDATE refusal_windows SET window_start = ?, unrecorded = 0
		WHERE account = ? AND server_id = ? AND principal = ? AND subject = ?`, micros(tx.now), key.Account, key.ServerID, key.Principal, key.Subject)
	if err != nil {
		return RefusalNote{}, fmt.Errorf("store: note refusal: %w", err)
	}
	return RefusalNote{Record: true, Unrecorded: unrecorded, Window: opened}, nil
}
