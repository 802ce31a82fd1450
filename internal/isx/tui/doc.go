// Package tui is isx's terminal UI (`isx tui`, and `isx` alone on a
// terminal): the templates and instances at a glance, with the keys for what
// a person does every day (branch, shell, start, stop, destroy, build); an
// instance's details (F3), where its MCP state, purpose and holder are shown
// (the instance list has no column for them, seed 001); and mission control
// (F4), every MCP instance and task of this host user across sessions.
//
// It stays live without polling Incus: the Incus events stream says when an
// instance changed, tasks are watched from inside their instance (task.Wait),
// and activity comes from the host proxy through Activities. It reads and
// acts through what cmd/isx gives it (Lister, Actions), so that a key does
// exactly what the matching isx command does.
package tui
