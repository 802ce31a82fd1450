// Package tracingtest gives tests a real tracing receiver: Jaeger on
// loopback, started by scripts/jaeger-up.sh, and reads back the spans a
// program sent it through Jaeger's query API.
package tracingtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/sourcetree"
)

// Receiver is a running Jaeger: OTLP is the endpoint a program exports to
// (OTEL_EXPORTER_OTLP_ENDPOINT), Query its query API.
type Receiver struct {
	OTLP, Query string
}

var started = sync.OnceValues(func() (Receiver, error) {
	root, err := sourcetree.Root()
	if err != nil {
		return Receiver{}, err
	}
	out, err := exec.Command(filepath.Join(root, "scripts", "jaeger-up.sh")).Output()
	if err != nil {
		var stderr string
		if exit, ok := err.(*exec.ExitError); ok {
			stderr = string(exit.Stderr)
		}
		return Receiver{}, fmt.Errorf("scripts/jaeger-up.sh: %w: %s", err, stderr)
	}
	lines := strings.Fields(string(out))
	if len(lines) != 2 {
		return Receiver{}, fmt.Errorf("scripts/jaeger-up.sh printed %q, not two URLs", out)
	}
	return Receiver{OTLP: lines[0], Query: lines[1]}, nil
})

// Jaeger is the tests' receiver, started once per test binary; a test
// fails when it cannot be had.
func Jaeger(t testing.TB) Receiver {
	t.Helper()
	r, err := started()
	if err != nil {
		t.Fatalf("no tracing receiver for the test: %v", err)
	}
	return r
}

// Span is a span as Jaeger's query API returns it.
type Span struct {
	TraceID       string      `json:"traceID"`
	SpanID        string      `json:"spanID"`
	OperationName string      `json:"operationName"`
	References    []Reference `json:"references"`
	StartTime     int64       `json:"startTime"` // µs since the epoch
	Duration      int64       `json:"duration"`  // µs
	Tags          []Tag       `json:"tags"`
	ProcessID     string      `json:"processID"`
	// Service is the process's service.name, filled in by Trace.
	Service string `json:"-"`
}

// Reference is a span's parent (CHILD_OF) or a link.
type Reference struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

// Tag is one attribute.
type Tag struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

// Parent is the span's CHILD_OF reference, "" for a root.
func (s Span) Parent() string {
	for _, ref := range s.References {
		if ref.RefType == "CHILD_OF" {
			return ref.SpanID
		}
	}
	return ""
}

// Tag is the value of the attribute key, nil when the span has none.
func (s Span) Tag(key string) any {
	for _, tag := range s.Tags {
		if tag.Key == key {
			return tag.Value
		}
	}
	return nil
}

// Trace reads the spans of traceID until at least want of them arrived
// (Jaeger stores what it received a batch at a time), or fails the test
// after a minute.
func (r Receiver) Trace(t testing.TB, traceID string, want int) []Span {
	t.Helper()
	return r.await(t, "trace "+traceID, want, func(ctx context.Context) ([]Span, error) {
		return r.read(ctx, "/"+traceID)
	})
}

// Service reads the spans service sent, of any trace, until at least
// want of them arrived, or fails the test after a minute.
func (r Receiver) Service(t testing.TB, service string, want int) []Span {
	t.Helper()
	return r.await(t, "service "+service, want, func(ctx context.Context) ([]Span, error) {
		return r.read(ctx, "?service="+url.QueryEscape(service)+"&limit=1000")
	})
}

// Operation reads the spans named operation that service sent, until at
// least want of them arrived, or fails the test after a minute.
func (r Receiver) Operation(t testing.TB, service, operation string, want int) []Span {
	t.Helper()
	return r.await(t, "service "+service+" operation "+operation, want, func(ctx context.Context) ([]Span, error) {
		spans, err := r.read(ctx, "?service="+url.QueryEscape(service)+"&operation="+url.QueryEscape(operation)+"&limit=1000")
		// A trace holds the operation's spans and their relatives.
		return slices.DeleteFunc(spans, func(s Span) bool { return s.OperationName != operation }), err
	})
}

func (r Receiver) await(t testing.TB, what string, want int, read func(context.Context) ([]Span, error)) []Span {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		spans, err := read(ctx)
		if err == nil && len(spans) >= want {
			return spans
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %d spans arrived, want %d (%v)", what, len(spans), want, err)
			return nil
		case <-tick.C:
		}
	}
}

func (r Receiver) read(ctx context.Context, query string) ([]Span, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.Query+"/api/traces"+query, nil)
	if err != nil {
		return nil, err
	}
	// A client of its own, whose connection goes with it: a test's
	// goroutine check must find nothing of Jaeger's left.
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, nil
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("jaeger answered %s", resp.Status)
	}
	var body struct {
		Data []struct {
			Spans     []Span `json:"spans"`
			Processes map[string]struct {
				ServiceName string `json:"serviceName"`
			} `json:"processes"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	var out []Span
	for _, trace := range body.Data {
		for _, span := range trace.Spans {
			span.Service = trace.Processes[span.ProcessID].ServiceName
			out = append(out, span)
		}
	}
	return out, nil
}

// NewIDs are a random trace id and span id in hex, as a traceparent
// spells them: a test's own trace, which no other test's spans join.
func NewIDs() (traceID, spanID string) {
	b := make([]byte, 24)
	rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:16]), hex.EncodeToString(b[16:])
}
