package tui

import (
	"context"
	"time"
)

// Activity is what the host proxy counted of one instance's model calls
// (instance_activity in seed 000), from CountingSince.
type Activity struct {
	CountingSince            time.Time
	InputTokens              int64
	OutputTokens             int64
	CacheReadInputTokens     int64
	CacheCreationInputTokens int64
	Requests                 int64
	RequestsInFlight         int64
	LastRequestAt            time.Time
	LastResponseAt           time.Time
	// IdleSeconds is how long since the last model call ended, as of the
	// reading; meaningful only while no call is in flight.
	IdleSeconds int64
	// TokensPerMinute is the tokens of each of the last minutes of the
	// clock, oldest first, the minute of the reading last.
	TokensPerMinute []int64
}

// Tokens is every token the counts cover.
func (a Activity) Tokens() int64 {
	return a.InputTokens + a.OutputTokens + a.CacheReadInputTokens + a.CacheCreationInputTokens
}

// Activities is the host proxy's view of the instances. Until the proxy
// exists the TUI has none and says "no proxy".
type Activities interface {
	// Watch sends the counts of every instance the proxy knows, by
	// instance name, at once and then whenever they change, until ctx
	// ends; then it closes the channel.
	Watch(ctx context.Context) (<-chan map[string]Activity, error)
}

// StuckAfter is how long a running task's instance may go without a
// model call before mission control marks the task possibly stuck: the
// seeds' "a growing idle_seconds means the agent is stuck, or finished
// without reporting".
const StuckAfter = 5 * time.Minute

// reading is the last Watch snapshot and when it arrived.
type reading struct {
	counts map[string]Activity
	at     time.Time
}

// idle is how long the instance has gone without a model call at now, and
// whether that is known (a call in flight, or an instance the proxy does
// not know, has no idle time).
func (r *reading) idle(name string, now time.Time) (time.Duration, bool) {
	if r == nil {
		return 0, false
	}
	a, ok := r.counts[name]
	if !ok || a.RequestsInFlight > 0 || a.Requests == 0 {
		return 0, false
	}
	return time.Duration(a.IdleSeconds)*time.Second + now.Sub(r.at), true
}
