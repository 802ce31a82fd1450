package mcpserver

import (
	"slices"
	"strings"
	"time"

	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
)

// Stamps isx mcp keeps besides those internal/instance names. They share
// its mcp- prefix, so instance.ClearMCP drops them from a fork as well.
const (
	// keyState marks an instance that is not simply ready: "creating"
	// from the moment it is reserved until it has started and answers;
	// "destroying <session>" or "stopping <session>" while a session
	// acts on it after marking it (mark, re-read, act).
	keyState = instance.MCPPrefix + "state"
	// keySource is what create_instance was asked to copy:
	// "template:<name>" or "instance:<name>", which a repeat of its
	// idempotency key must ask for again.
	keySource = instance.MCPPrefix + "source"
	// keyRunning lists the ids of the background tasks believed running
	// in the instance, so that max-concurrent-tasks is counted without
	// running anything in instances.
	keyRunning = instance.MCPPrefix + "running"
	// keyTaskKeys lists the idempotency keys of the instance's background
	// tasks, so that a repeat naming another instance is refused.
	keyTaskKeys = instance.MCPPrefix + "task-keys"
)

const (
	stateCreating   = "creating"
	stateDestroying = "destroying"
	stateStopping   = "stopping"
)

// mcpView is what isx mcp reads of one instance.
type mcpView struct {
	inst     *incus.Instance
	stamps   instance.Stamps
	state    string // stateCreating, stateDestroying, stateStopping or ""
	marker   string // the session that set a destroying or stopping mark
	running  []string
	taskKeys []string
}

func viewOf(inst *incus.Instance) mcpView {
	v := mcpView{inst: inst, stamps: instance.ParseStamps(inst.Config)}
	state := inst.Config[keyState]
	v.state, v.marker, _ = strings.Cut(state, " ")
	v.running = strings.Fields(inst.Config[keyRunning])
	v.taskKeys = strings.Fields(inst.Config[keyTaskKeys])
	return v
}

// isMCP reports whether isx mcp made the instance.
func (v mcpView) isMCP() bool { return v.stamps.MCP.Owner != "" }

// holding is an instance's relation to the calling session.
type holding int

const (
	heldHere      holding = iota // this session holds it
	heldElsewhere                // another live session holds it
	orphaned                     // its session ended or died
)

// holdingFor classifies the instance for session. An orphaned stamp wins
// over the session stamp: a session that finds its own instance orphaned
// must adopt it again.
func (v mcpView) holdingFor(session string) holding {
	switch m := v.stamps.MCP; {
	case m.Orphaned != "":
		return orphaned
	case m.Session == session:
		return heldHere
	case SessionAlive(m.Session):
		return heldElsewhere
	}
	return orphaned
}

// marked reports whether a live session has marked the instance to destroy
// or stop it, so nobody else may act on it.
func (v mcpView) marked() bool {
	return (v.state == stateDestroying || v.state == stateStopping) && SessionAlive(v.marker)
}

// creating reports whether the instance is still being made.
func (v mcpView) creating() bool { return v.state == stateCreating }

// orphanedAt is when the instance became an orphan, if it is stamped so.
func (v mcpView) orphanedAt() (time.Time, bool) {
	at, _, ok := v.stamps.MCP.OrphanedAt()
	return at, ok
}

// dormantAt is when the sweep stopped the instance as dormant.
func (v mcpView) dormantAt() (time.Time, bool) {
	t, err := time.Parse(time.RFC3339, v.stamps.MCP.Dormant)
	return t, err == nil
}

// withWord adds word to a space-separated stamp value, once.
func withWord(value, word string) string {
	words := strings.Fields(value)
	if slices.Contains(words, word) {
		return value
	}
	return strings.Join(append(words, word), " ")
}

// withoutWords removes words from a space-separated stamp value.
func withoutWords(value string, drop ...string) string {
	words := slices.DeleteFunc(strings.Fields(value), func(w string) bool { return slices.Contains(drop, w) })
	return strings.Join(words, " ")
}

func formatTime(t time.Time) string { return instance.FormatTime(t) }
