package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/incusspawn/isx/internal/coded"
)

// CodePublicURLInUse: a live process serves the database at another public
// URL.
const CodePublicURLInUse = "store_public_url_in_use"

// ProcessInfo is what a serving process says of itself in its processes
// row, for a person to find it by.
type ProcessInfo struct {
	PID       int    `json:"pid"`
	Host      string `json:"host,omitempty"`
	Listen    string `json:"listen,omitempty"`
	PublicURL string `json:"publicURL"`
}

// describe names the process for a message.
func (p ProcessInfo) describe() string {
	var about []string
	if p.PID != 0 {
		about = append(about, fmt.Sprintf("pid %d", p.PID))
	}
	if p.Host != "" {
		about = append(about, "on "+p.Host)
	}
	if p.Listen != "" {
		about = append(about, "listening on "+p.Listen)
	}
	if len(about) == 0 {
		return "another actiond process"
	}
	return "another actiond process (" + strings.Join(about, ", ") + ")"
}

// publicURLLock serialises processes starting on one Postgres database, so
// that two with different public URLs cannot both find the other absent.
const publicURLLock = 7461637

// ServeAs records process id as serving the database at info.PublicURL and
// makes that the public URL `actiond token` signs as. It returns the URL it
// replaced ("" when it was the same or none).
//
// Every process of one database serves one public URL, the issuer and
// audience of the tokens the others accept: on Postgres, ServeAs refuses
// while a live process, one whose heartbeat is not older than liveness,
// serves another, rather than let the tokens `actiond token` signs stop
// working there.
func (s *Store) ServeAs(ctx context.Context, id string, info ProcessInfo, liveness time.Duration) (replaced string, err error) {
	record, err := json.Marshal(info)
	if err != nil {
		return "", err
	}
	err = s.Write(ctx, func(tx *Tx) error {
		replaced = ""
		// On SQLite the data directory's lock (LockDataDir) says no other
		// process serves it: rows of others are what a killed one left.
		if tx.dialect == Postgres {
			if _, err := tx.exec(ctx, "SELECT pg_advisory_xact_lock(?)", publicURLLock); err != nil {
				return fmt.Errorf("store: lock the public URL: %w", err)
			}
			if err := tx.refuseOtherPublicURL(ctx, id, info.PublicURL, tx.now.Add(-liveness)); err != nil {
				return err
			}
		}
		_, err := tx.exec(ctx, `INSERT INTO processes (id, started_at, heartbeat_at, info) VALUES (?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, info = excluded.info`, id, micros(tx.now), micros(tx.now), string(record))
		if err != nil {
			return fmt.Errorf("store: register process: %w", err)
		}
		var previous string
		err = tx.queryRow(ctx, "SELECT value FROM settings WHERE name = ?", SettingPublicURL).Scan(&previous)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("store: read setting %s: %w", SettingPublicURL, err)
		}
		if previous != info.PublicURL {
			replaced = previous
		}
		_, err = tx.exec(ctx, `INSERT INTO settings (name, value, updated_at) VALUES (?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`, SettingPublicURL, info.PublicURL, micros(tx.now))
		if err != nil {
			return fmt.Errorf("store: save setting %s: %w", SettingPublicURL, err)
		}
		return nil
	})
	return replaced, err
}

// refuseOtherPublicURL refuses when a process other than self, with a
// heartbeat since `since`, says it serves another public URL.
func (tx *Tx) refuseOtherPublicURL(ctx context.Context, self, publicURL string, since time.Time) error {
	rows, err := tx.query(ctx, "SELECT info, heartbeat_at FROM processes WHERE id <> ? AND heartbeat_at >= ? AND info IS NOT NULL ORDER BY started_at", self, micros(since))
	if err != nil {
		return fmt.Errorf("store: read the serving processes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var raw string
		var heartbeat int64
		if err := rows.Scan(&raw, &heartbeat); err != nil {
			return err
		}
		var other ProcessInfo
		if json.Unmarshal([]byte(raw), &other) != nil || other.PublicURL == "" || other.PublicURL == publicURL {
			continue
		}
		age := tx.now.Sub(fromMicros(heartbeat)).Round(time.Second)
		return coded.New(CodePublicURLInUse, "%s serves this database at %s (its last heartbeat %s ago); every process of one database serves one public URL, which its tokens name",
			other.describe(), other.PublicURL, age).
			WithHint("Start this one with --public-url " + other.PublicURL + ", or stop the others first: a stopped process no longer counts once its heartbeat is older than --liveness.")
	}
	return rows.Err()
}
