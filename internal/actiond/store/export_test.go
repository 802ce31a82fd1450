package store

import "context"

// ForgetWeights makes the database look as schema 4 left it: sessions
// without a weight, and the recorded schema 4, so that the next Open
// upgrades it.
func (tx *Tx) ForgetWeights(ctx context.Context) error {
	for _, statement := range []string{"ALTER TABLE sessions DROP COLUMN weight", "DELETE FROM schema_version", "INSERT INTO schema_version (version) VALUES (4)"} {
		if _, err := tx.tx.ExecContext(ctx, statement); err != nil {
			return err
		}
	}
	return nil
}
