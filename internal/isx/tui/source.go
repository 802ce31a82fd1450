package tui

import (
	"context"
	"io"

	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/task"
)

// Listing is what the lists show, collected as `isx list` collects it.
type Listing struct {
	Templates []Template
	// Instances are the project's isx instances (not templates), sorted by
	// name.
	Instances []instance.Entry
	// Notes are warnings that concern no single template, such as
	// definition files that could not be read.
	Notes []string
}

// Template is one row of the template list.
type Template struct {
	Name   string
	Source string // builtin, user, search-path, project-local, or the built one's stamp
	// Status is what `isx list` says: built, stale, not built, invalid, or
	// "built, no definition".
	Status string
	// Note says why it is stale or invalid; empty otherwise.
	Note        string
	Tools       []string
	Description string
	From        string // "image <alias>" or "parent <template>"
	Path        string // the definition's file
}

// Lister reads what the lists show.
type Lister interface {
	Listing(ctx context.Context) (*Listing, error)
}

// Actions do what the keys ask, the way the isx commands do it. Each
// returns the sentence the command would print, or its error.
type Actions interface {
	Branch(ctx context.Context, name, from string, network instance.Network) (string, error)
	// Build builds a template (its stale or unbuilt parents first),
	// writing progress lines to progress as `isx build` prints them.
	Build(ctx context.Context, template string, progress io.Writer) (string, error)
	Start(ctx context.Context, name string) (string, error)
	Stop(ctx context.Context, name string) (string, error)
	Destroy(ctx context.Context, name string) (string, error)
	// Shell runs `isx shell NAME` (or, with a task id, `isx shell --task`)
	// on the terminal the TUI has let go of for the while.
	Shell(ctx context.Context, name, taskID string, stdout, stderr io.Writer) error
}

// Incus is what the TUI reads from the daemon itself: its events, and the
// task records inside instances; *incus.Client is one.
type Incus interface {
	task.Executor
	Events(ctx context.Context, types ...string) (*incus.EventStream, error)
	ProjectName() string
}
