package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/incusspawn/isx/internal/coded"
)

// DatabaseFile is the SQLite database's name inside the data directory.
const DatabaseFile = "actiond.db"

// checkAccess finds out before SQLite does whether this process may read
// and write the data directory (SQLite keeps its -wal and -shm files
// beside the database) and the database file, because SQLite's own error
// names neither the path nor the permission.
func checkAccess(dir, path string) error {
	if err := unix.Access(dir, unix.R_OK|unix.W_OK|unix.X_OK); err != nil {
		return accessError(dir, "read and write the data directory", err)
	}
	if err := unix.Access(path, unix.R_OK|unix.W_OK); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return accessError(path, "read and write the database file", err)
	}
	return nil
}

// accessError names the path, what was tried, the path's mode and owner,
// and who actiond runs as.
func accessError(path, what string, err error) error {
	detail := ""
	if info, statErr := os.Stat(path); statErr == nil {
		detail = fmt.Sprintf(" (mode %04o", info.Mode().Perm())
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			detail += fmt.Sprintf(", owner uid %d gid %d", st.Uid, st.Gid)
		}
		detail += ")"
	}
	if errors.Is(err, fs.ErrPermission) {
		return coded.Wrap(CodeAccess, err, "cannot %s %s%s: actiond runs as uid %d, which lacks read and write permission on it",
			what, path, detail, os.Geteuid()).
			WithHint("Give that user read and write permission on " + path + " (chown or chmod), or pass another --data directory.")
	}
	return coded.Wrap(CodeAccess, err, "cannot %s %s%s", what, path, detail)
}

// requireTables refuses a Postgres database (or schema) that actiond never
// opened, instead of creating its tables there.
func requireTables(ctx context.Context, db *sql.DB, opts Options) error {
	var name sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT to_regclass('schema_version')::text").Scan(&name); err != nil {
		return fmt.Errorf("store: cannot reach Postgres at %s: %w", redactDSN(opts.PostgresDSN), err)
	}
	if !name.Valid {
		where := redactDSN(opts.PostgresDSN)
		if opts.PostgresSchema != "" {
			where += " (schema " + opts.PostgresSchema + ")"
		}
		return coded.New(CodeNoDatabase, "no actiond database in the Postgres database at %s", where).
			WithHint("Pass the --postgres DSN `actiond serve` uses, or start `actiond serve` on it first.")
	}
	return nil
}
