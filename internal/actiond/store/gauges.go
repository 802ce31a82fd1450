package store

import (
	"context"
	"fmt"
	"time"
)

// Gauges are what the database holds now, for the metrics: read when they
// are scraped, across every process that shares the database.
type Gauges struct {
	// Queued counts the tasks waiting for a first attempt, Retrying those
	// waiting to be tried again.
	Queued, Retrying int64
	// OldestDue is how long the task that has waited longest for a worker
	// since it became claimable has waited (zero when none waits).
	OldestDue time.Duration
	// OpenSessions counts the sessions not closed.
	OpenSessions int64
}

// ReadGauges reads the gauges.
func (tx *Tx) ReadGauges(ctx context.Context) (Gauges, error) {
	var g Gauges
	var oldest *int64
	err := tx.queryRow(ctx, `SELECT
			COALESCE(SUM(CASE WHEN status = ? THEN 1 ELSE 0 END), 0),
			COALESCE(SUM(CASE WHEN status = ? THEN 1 ELSE 0 END), 0),
			MIN(CASE WHEN run_after <= ? THEN run_after END)
		FROM tasks WHERE status IN (?, ?)`,
		Queued, RetryScheduled, micros(tx.now), Queued, RetryScheduled).Scan(&g.Queued, &g.Retrying, &oldest)
	if err != nil {
		return g, fmt.Errorf("store: count queued tasks: %w", err)
	}
	if oldest != nil {
		g.OldestDue = max(0, tx.now.Sub(fromMicros(*oldest)))
	}
	if err := tx.queryRow(ctx, "SELECT COUNT(*) FROM sessions WHERE closed_at = 0").Scan(&g.OpenSessions); err != nil {
		return g, fmt.Errorf("store: count open sessions: %w", err)
	}
	return g, nil
}

// ReadGauges reads the gauges in a transaction of their own.
func (s *Store) ReadGauges(ctx context.Context) (g Gauges, err error) {
	err = s.Read(ctx, func(tx *Tx) error {
		g, err = tx.ReadGauges(ctx)
		return err
	})
	return g, err
}
