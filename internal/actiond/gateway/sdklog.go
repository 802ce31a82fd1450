package gateway

import (
	"context"
	"log/slog"
)

// sdkLogger is the logger the MCP SDK gets. The SDK tells of every
// stateless request at INFO ("server connecting", "server session
// connected", "… disconnected"): three lines a request say nothing an
// operator acts on, so they go to DEBUG; its warnings and errors stay.
func sdkLogger(logger *slog.Logger) *slog.Logger {
	return slog.New(demoted{logger.Handler()})
}

// demoted logs INFO records at DEBUG.
type demoted struct{ slog.Handler }

func (d demoted) Enabled(ctx context.Context, level slog.Level) bool {
	return d.Handler.Enabled(ctx, demote(level))
}

func (d demoted) Handle(ctx context.Context, r slog.Record) error {
	r.Level = demote(r.Level)
	return d.Handler.Handle(ctx, r)
}

func (d demoted) WithAttrs(attrs []slog.Attr) slog.Handler {
	return demoted{d.Handler.WithAttrs(attrs)}
}

func (d demoted) WithGroup(name string) slog.Handler {
	return demoted{d.Handler.WithGroup(name)}
}

func demote(level slog.Level) slog.Level {
	if level == slog.LevelInfo {
		return slog.LevelDebug
	}
	return level
}
