package holding

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
	StateCreating   = "creating"
	StateDestroying = "destroying"
	StateStopping   = "stopping"
)

// View is what isx mcp reads of one instance.
type View struct {
	Inst   *incus.Instance
	Stamps instance.Stamps
	// State is StateCreating, StateDestroying, StateStopping or "".
	State string
	// Marker is the session that set a destroying or stopping mark.
	Marker string
	// Running are the task ids believed running (max-concurrent-tasks),
	// TaskKeys the idempotency keys of its tasks.
	Running  []string
	TaskKeys []string
}

// ViewOf reads an instance's mcp stamps.
func ViewOf(inst *incus.Instance) View {
	v := View{Inst: inst, Stamps: instance.ParseStamps(inst.Config)}
	v.State, v.Marker, _ = strings.Cut(v.Stamps.MCP.State, " ")
	v.Running = strings.Fields(v.Stamps.MCP.Running)
	v.TaskKeys = strings.Fields(v.Stamps.MCP.TaskKeys)
	return v
}

// IsMCP reports whether isx mcp made the instance.
func (v View) IsMCP() bool { return v.Stamps.MCP.Owner != "" }

// Holding is an instance's relation to a session.
type Holding int

const (
	HeldHere      Holding = iota // this session holds it
	HeldElsewhere                // another live session holds it
	Orphaned                     // its session ended or died
)

// HoldingFor classifies the instance for session. An orphaned stamp wins
// over the session stamp: a session that finds its own instance orphaned
// must adopt it again.
func (v View) HoldingFor(session string) Holding {
	switch m := v.Stamps.MCP; {
	case m.Orphaned != "":
		return Orphaned
	case m.Session == session:
		return HeldHere
	case SessionAlive(m.Session):
		return HeldElsewhere
	}
	return Orphaned
}

// Marked reports whether a live session has marked the instance to destroy
// or stop it, so nobody else may act on it.
func (v View) Marked() bool {
	return (v.State == StateDestroying || v.State == StateStopping) && SessionAlive(v.Marker)
}

// Creating reports whether the instance is still being made.
func (v View) Creating() bool { return v.State == StateCreating }

// OrphanedAt is when the instance became an orphan, if it is stamped so.
func (v View) OrphanedAt() (time.Time, bool) {
	at, _, ok := v.Stamps.MCP.OrphanedAt()
	return at, ok
}

// DormantAt is when the sweep stopped the instance as dormant.
func (v View) DormantAt() (time.Time, bool) {
	t, err := time.Parse(time.RFC3339, v.Stamps.MCP.Dormant)
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
