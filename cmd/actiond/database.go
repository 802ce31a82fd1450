package main

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/incusspawn/isx/internal/actiond/store"
)

// database is how every command finds the database.
type database struct {
	data     string
	postgres string
	schema   string
	cmd      *cobra.Command
}

func (d *database) register(cmd *cobra.Command) {
	d.cmd = cmd
	cmd.Flags().StringVar(&d.data, "data", defaultDataDir(), "directory of the embedded SQLite database (env ACTIOND_DATA)")
	cmd.Flags().StringVar(&d.postgres, "postgres", os.Getenv("ACTIOND_POSTGRES"), "Postgres DSN instead of --data (env ACTIOND_POSTGRES); any number of actiond processes may share one")
	cmd.Flags().StringVar(&d.schema, "postgres-schema", "", "keep actiond's tables in this Postgres schema")
	_ = cmd.RegisterFlagCompletionFunc("postgres-schema", cobra.NoFileCompletions)
	_ = cmd.MarkFlagDirname("data")
}

func (d *database) options(existing bool) store.Options {
	if d.postgres != "" {
		return store.Options{PostgresDSN: d.postgres, PostgresSchema: d.schema, Existing: existing}
	}
	return store.Options{DataDir: d.data, Existing: existing}
}

// both says whether --data was given beside --postgres, which then wins.
func (d *database) both() bool {
	return d.postgres != "" && d.cmd.Flags().Changed("data")
}

// describe names the store for a person.
func (d *database) describe() string {
	if d.postgres != "" {
		where := "Postgres at " + withoutPassword(d.postgres)
		if d.schema != "" {
			where += ", schema " + d.schema
		}
		return where
	}
	return "SQLite in " + d.data
}

// flags are the command line flags that open the same database, for the
// commands actiond prints; a DSN's password is left out.
func (d *database) flags() string {
	if d.postgres != "" {
		out := "--postgres " + shellQuote(withoutPassword(d.postgres))
		if d.schema != "" {
			out += " --postgres-schema " + shellQuote(d.schema)
		}
		return out
	}
	return "--data " + shellQuote(d.data)
}

// openExisting opens a database actiond serve made, refusing to make one.
func (d *database) openExisting(ctx context.Context) (*store.Store, error) {
	return store.Open(ctx, d.options(true))
}

func defaultDataDir() string {
	if dir := os.Getenv("ACTIOND_DATA"); dir != "" {
		return dir
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "actiond-data"
	}
	return filepath.Join(home, ".local", "share", "actiond")
}

// withoutPassword drops the password of a URL DSN: pgx reads PGPASSWORD
// when the DSN has none.
func withoutPassword(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return dsn
	}
	if _, ok := u.User.Password(); !ok {
		return dsn
	}
	u.User = url.User(u.User.Username())
	return u.String()
}

func hasPassword(dsn string) bool {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return false
	}
	_, ok := u.User.Password()
	return ok
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@%+=,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
