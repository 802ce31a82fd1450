package incus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Event types the daemon can stream.
const (
	EventLifecycle = "lifecycle"
	EventOperation = "operation"
	EventLogging   = "logging"
)

// eventReadLimit bounds one event message; operation events carry metadata.
const eventReadLimit = 8 << 20

// Event is one message of the daemon's event stream.
type Event struct {
	Type      string          `json:"type"`
	Timestamp time.Time       `json:"timestamp"`
	Project   string          `json:"project"`
	Location  string          `json:"location"`
	Metadata  json.RawMessage `json:"metadata"`
}

// LifecycleEvent is the metadata of a "lifecycle" event, e.g. Action
// "instance-started" with Source "/1.0/instances/web?project=p".
type LifecycleEvent struct {
	Action  string         `json:"action"`
	Source  string         `json:"source"`
	Context map[string]any `json:"context"`
}

// Lifecycle decodes a lifecycle event's metadata.
func (e Event) Lifecycle() (*LifecycleEvent, error) {
	if e.Type != EventLifecycle {
		return nil, fmt.Errorf("event of type %q is not a lifecycle event", e.Type)
	}
	var l LifecycleEvent
	if err := json.Unmarshal(e.Metadata, &l); err != nil {
		return nil, fmt.Errorf("decoding lifecycle event: %w", err)
	}
	return &l, nil
}

// Instance is the instance name the event's Source names, or "".
func (l *LifecycleEvent) Instance() string {
	source, _, _ := strings.Cut(l.Source, "?")
	rest, ok := strings.CutPrefix(source, "/1.0/instances/")
	if !ok || strings.Contains(rest, "/") {
		return ""
	}
	name, err := url.PathUnescape(rest)
	if err != nil {
		return ""
	}
	return name
}

// EventStream delivers events until its context ends or the connection
// breaks; then Events is closed and Err says why (nil after the context
// ended). A reader that stops reading holds the stream up: cancel the
// context instead.
type EventStream struct {
	Events <-chan Event
	mu     sync.Mutex
	err    error
}

// Err is the reason the stream ended; only meaningful once Events is closed.
func (s *EventStream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Events subscribes to the daemon's events of the given types (all types
// when none are given) in the client's project. It returns once the
// subscription is active, so whatever the caller does next is seen.
func (c *Client) Events(ctx context.Context, types ...string) (*EventStream, error) {
	query := url.Values{}
	if len(types) > 0 {
		query.Set("type", strings.Join(types, ","))
	}
	if c.project != "" {
		query.Set("project", c.project)
	}
	target := "ws://incus/1.0/events"
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	conn, _, err := websocket.Dial(ctx, target, &websocket.DialOptions{HTTPClient: c.http})
	if err != nil {
		return nil, transportError(request{method: "GET", path: "/1.0/events"}, err)
	}
	conn.SetReadLimit(eventReadLimit)
	events := make(chan Event, 64)
	stream := &EventStream{Events: events}
	go stream.pump(ctx, conn, events)
	return stream, nil
}

func (s *EventStream) pump(ctx context.Context, conn *websocket.Conn, events chan<- Event) {
	defer close(events)
	defer conn.CloseNow()
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			s.fail(ctx, fmt.Errorf("incus: event stream: %w", err))
			return
		}
		var event Event
		if err := json.Unmarshal(data, &event); err != nil {
			s.fail(ctx, fmt.Errorf("incus: decoding event: %w", err))
			return
		}
		select {
		case events <- event:
		case <-ctx.Done():
			return
		}
	}
}

func (s *EventStream) fail(ctx context.Context, err error) {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return
	}
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
}
