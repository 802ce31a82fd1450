package mcpserver

import (
	"slices"
	"strings"
	"time"

	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
)

// Values of instance.KeyMCPState, which says an MCP instance is not simply
// ready.
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
	v.state, v.marker, _ = strings.Cut(v.stamps.MCP.State, " ")
	v.running = strings.Fields(v.stamps.MCP.Running)
	v.taskKeys = strings.Fields(v.stamps.MCP.TaskKeys)
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
