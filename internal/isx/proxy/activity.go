package proxy

import (
	"slices"
	"sync"
	"time"
)

// ProviderAnthropic is the one provider whose usage the token counts
// cover; OpenAI calls appear in the traffic counts only.
const ProviderAnthropic = "anthropic"

// TimeFormat is how activity times are written: RFC 3339 in UTC, to the
// millisecond.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// Activity is what the proxy counted of one instance's current
// incarnation, as instance_activity and `isx proxy activity --json` report
// it (the fields of seed 000, "Telling working from stuck").
type Activity struct {
	Instance      string `json:"instance"`
	CountingSince string `json:"counting_since,omitempty" jsonschema:"when the proxy began counting this instance (this start of it, or the proxy's own start); absent while the proxy does not know the instance. Subtract two reads only when both carry the same counting_since"`

	InputTokens              int64 `json:"input_tokens" jsonschema:"input tokens of the model calls since counting_since, as the API reported them"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`

	Requests         int64  `json:"requests" jsonschema:"model calls made since counting_since"`
	RequestsInFlight int64  `json:"requests_in_flight" jsonschema:"model calls in progress: the agent is working"`
	LastRequestAt    string `json:"last_request_at,omitempty" jsonschema:"when the last model call started"`
	LastResponseAt   string `json:"last_response_at,omitempty" jsonschema:"when the last model call ended"`
	IdleSeconds      *int64 `json:"idle_seconds,omitempty" jsonschema:"seconds since the last model call ended (or since counting_since, before the first); absent while a model call is in flight"`

	ModelUsageProviders []string `json:"model_usage_providers" jsonschema:"whose model calls the counts above cover: anthropic only; OpenAI calls appear in traffic_*"`

	TrafficRequests       int64  `json:"traffic_requests" jsonschema:"every request the instance made through the proxy since counting_since, model calls, package downloads, git and tunnels included"`
	TrafficInFlight       int64  `json:"traffic_in_flight" jsonschema:"requests, tunnels and WebSockets open now"`
	TrafficBytesSent      int64  `json:"traffic_bytes_sent" jsonschema:"bytes the instance sent through the proxy (bodies and tunnels)"`
	TrafficBytesReceived  int64  `json:"traffic_bytes_received" jsonschema:"bytes the instance received through the proxy"`
	TrafficLastActivityAt string `json:"traffic_last_activity_at,omitempty" jsonschema:"when bytes last moved for the instance"`

	TokensPerMinute []int64 `json:"tokens_per_minute,omitempty" jsonschema:"tokens (input, output and cache) credited to the instance's model calls in each of the last 15 minutes of the host's clock, oldest first, the current minute last"`
}

// SpendMinutes is how many minutes of token spend an Activity carries.
const SpendMinutes = 15

// Unknown is the activity of an instance the proxy does not know.
func Unknown(instance string) Activity {
	return Activity{Instance: instance, ModelUsageProviders: []string{ProviderAnthropic}}
}

// Known reports whether the proxy knew the instance (counting_since is set).
func (a Activity) Known() bool { return a.CountingSince != "" }

// Usage is the token usage of model calls.
type Usage struct {
	Input, Output, CacheRead, CacheCreation int64
}

// atLeast is, field by field, the larger of u and o.
func (u Usage) atLeast(o Usage) Usage {
	return Usage{max(u.Input, o.Input), max(u.Output, o.Output), max(u.CacheRead, o.CacheRead), max(u.CacheCreation, o.CacheCreation)}
}

func (u Usage) minus(o Usage) Usage {
	return Usage{u.Input - o.Input, u.Output - o.Output, u.CacheRead - o.CacheRead, u.CacheCreation - o.CacheCreation}
}

func (u Usage) plus(o Usage) Usage {
	return Usage{u.Input + o.Input, u.Output + o.Output, u.CacheRead + o.CacheRead, u.CacheCreation + o.CacheCreation}
}

// counters are one instance incarnation's counts. Every method is safe
// for concurrent use.
type counters struct {
	mu    sync.Mutex
	since time.Time
	usage Usage

	requests, inFlight        int64
	lastRequest, lastResponse time.Time

	trafficRequests, trafficInFlight int64
	sent, received                   int64
	lastActivity                     time.Time

	// spend is tokens credited per minute, the newest last; spendMinute
	// is the minute (Unix time / 60) of the newest.
	spend       [SpendMinutes]int64
	spendMinute int64

	// changed is rung after every change; nil rings nothing.
	changed *bell
}

func newCounters(since time.Time, changed *bell) *counters {
	return &counters{since: since, changed: changed}
}

func (c *counters) modelStarted(now time.Time) {
	defer c.changed.ring()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests++
	c.inFlight++
	c.lastRequest = now
}

func (c *counters) modelEnded(now time.Time) {
	defer c.changed.ring()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inFlight--
	c.lastResponse = now
}

func (c *counters) addUsage(u Usage, now time.Time) {
	defer c.changed.ring()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.usage = c.usage.plus(u)
	c.roll(now)
	c.spend[SpendMinutes-1] += u.Input + u.Output + u.CacheRead + u.CacheCreation
}

// roll moves the spend history on to now's minute; c.mu is held.
func (c *counters) roll(now time.Time) {
	minute := now.Unix() / 60
	passed := minute - c.spendMinute
	switch {
	case passed <= 0:
		return
	case passed >= SpendMinutes:
		clear(c.spend[:])
	default:
		copy(c.spend[:], c.spend[passed:])
		clear(c.spend[SpendMinutes-passed:])
	}
	c.spendMinute = minute
}

func (c *counters) trafficStarted(now time.Time) {
	defer c.changed.ring()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.trafficRequests++
	c.trafficInFlight++
	c.lastActivity = now
}

func (c *counters) trafficEnded(now time.Time) {
	defer c.changed.ring()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.trafficInFlight--
	c.lastActivity = now
}

// moved counts bytes sent by the instance (up) and received by it (down).
func (c *counters) moved(up, down int64, now time.Time) {
	defer c.changed.ring()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent += up
	c.received += down
	c.lastActivity = now
}

// activity is the counts as read at now.
func (c *counters) activity(instance string, now time.Time) Activity {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := Unknown(instance)
	a.CountingSince = formatTime(c.since)
	a.InputTokens, a.OutputTokens = c.usage.Input, c.usage.Output
	a.CacheReadInputTokens, a.CacheCreationInputTokens = c.usage.CacheRead, c.usage.CacheCreation
	a.Requests, a.RequestsInFlight = c.requests, c.inFlight
	a.LastRequestAt, a.LastResponseAt = formatTime(c.lastRequest), formatTime(c.lastResponse)
	if c.inFlight == 0 {
		idleFrom := c.since
		if !c.lastResponse.IsZero() {
			idleFrom = c.lastResponse
		}
		idle := int64(max(now.Sub(idleFrom), 0) / time.Second)
		a.IdleSeconds = &idle
	}
	a.TrafficRequests, a.TrafficInFlight = c.trafficRequests, c.trafficInFlight
	a.TrafficBytesSent, a.TrafficBytesReceived = c.sent, c.received
	a.TrafficLastActivityAt = formatTime(c.lastActivity)
	c.roll(now)
	a.TokensPerMinute = slices.Clone(c.spend[:])
	return a
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(TimeFormat)
}

// ParseTime reads a time of an Activity; "" is the zero time.
func ParseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	return time.Parse(time.RFC3339Nano, s)
}
