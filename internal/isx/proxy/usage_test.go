package proxy

import (
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/clock"
)

// feed writes body to a meter in pieces of size n, as a network would.
func feed(m *usageMeter, body string, n int) {
	for len(body) > 0 {
		k := min(n, len(body))
		m.Write([]byte(body[:k])) //nolint:errcheck // never fails
		body = body[k:]
	}
}

const stream = "event: message_start\r\n" +
	`data: {"type":"message_start","message":{"id":"m","usage":{"input_tokens":25,"cache_creation_input_tokens":4,"cache_read_input_tokens":9,"output_tokens":1}}}` + "\r\n\r\n" +
	"event: content_block_delta\n" +
	`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"usage: not this"}}` + "\n\n" +
	"event: ping\ndata: {\"type\": \"ping\"}\n\n" +
	"event: message_delta\n" +
	`data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":7}}` + "\n\n" +
	"event: message_delta\n" +
	`data: {"type":"message_delta","usage":{"input_tokens":25,"cache_creation_input_tokens":4,"cache_read_input_tokens":9,"output_tokens":15}}` + "\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

// In a stream the usage is cumulative: each field counts its largest
// value once, whichever events repeat it, however the bytes are split;
// and what grew is credited as soon as it grows.
func TestUsageMeterStreamKeepsTheLargestValue(t *testing.T) {
	for _, piece := range []int{1, 7, 64, len(stream)} {
		var credited []Usage
		m := newUsageMeter("text/event-stream; charset=utf-8", func(u Usage) { credited = append(credited, u) })
		feed(m, stream, piece)
		m.finish(true)
		var total Usage
		for _, u := range credited {
			total = total.plus(u)
		}
		if want := (Usage{Input: 25, Output: 15, CacheRead: 9, CacheCreation: 4}); total != want {
			t.Errorf("pieces of %d: credited %+v in total, want %+v", piece, total, want)
		}
		if len(credited) != 3 || credited[0].Output != 1 {
			t.Errorf("pieces of %d: credits %+v, want one per growth (1, then 6, then 8 output tokens)", piece, credited)
		}
		if m.Problem() != nil {
			t.Errorf("pieces of %d: %v", piece, m.Problem())
		}
	}
}

// A JSON answer's usage is read once the whole body is in; a body cut
// short, or one that is not JSON, credits nothing and says why.
func TestUsageMeterJSON(t *testing.T) {
	body := `{"id":"m","type":"message","content":[{"type":"text","text":"{\"usage\":{\"input_tokens\":999}}"}],"usage":{"input_tokens":12,"output_tokens":34,"cache_read_input_tokens":5,"cache_creation_input_tokens":6}}`
	var got Usage
	m := newUsageMeter("application/json", func(u Usage) { got = got.plus(u) })
	feed(m, body, 10)
	m.finish(true)
	if want := (Usage{Input: 12, Output: 34, CacheRead: 5, CacheCreation: 6}); got != want {
		t.Errorf("credited %+v, want %+v", got, want)
	}

	got = Usage{}
	m = newUsageMeter("application/json", func(u Usage) { got = got.plus(u) })
	feed(m, body[:40], 10)
	m.finish(false)
	if got != (Usage{}) || m.Problem() != nil {
		t.Errorf("a body cut short credited %+v (%v)", got, m.Problem())
	}
	m = newUsageMeter("application/json", func(u Usage) { got = got.plus(u) })
	feed(m, `{"usage": {"input_tokens": 3`, 10)
	m.finish(true)
	if got != (Usage{}) || m.Problem() == nil {
		t.Errorf("a malformed body credited %+v, problem %v", got, m.Problem())
	}
}

// The meter never holds more than its bounds: a huge JSON body or SSE
// line is passed on unread, and said to be.
func TestUsageMeterBounds(t *testing.T) {
	m := newUsageMeter("application/json", func(Usage) { t.Error("credited a body larger than the bound") })
	feed(m, strings.Repeat(" ", maxUsageJSON+1), 1<<16)
	m.finish(true)
	if m.Problem() == nil || m.body.Cap() > 2*maxUsageJSON {
		t.Errorf("problem %v, buffer %d", m.Problem(), m.body.Cap())
	}
	var got Usage
	m = newUsageMeter("text/event-stream", func(u Usage) { got = got.plus(u) })
	feed(m, "data: "+strings.Repeat("x", maxSSELine+10)+"\n\n", 1<<16)
	feed(m, `data: {"usage":{"output_tokens":3}}`+"\n", 5)
	if cap(m.line) > 2*maxSSELine || got.Output != 3 || m.Problem() == nil {
		t.Errorf("after a huge line: line buffer %d, credited %+v, problem %v", cap(m.line), got, m.Problem())
	}
}

// idle_seconds counts from the last model call's end (or from
// counting_since before the first), and is absent while a call is in
// flight. ISX-178, ISX-179.
func TestCountersIdleSecondsISX178ISX179(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	fake := clock.NewFake(start)
	c := newCounters(start, nil)
	if a := c.activity("x", fake.Now()); a.IdleSeconds == nil || *a.IdleSeconds != 0 || a.CountingSince != "2030-01-01T00:00:00.000Z" {
		t.Fatalf("fresh: %+v", a)
	}
	fake.Advance(10 * time.Second)
	c.modelStarted(fake.Now())
	fake.Advance(time.Hour)
	if a := c.activity("x", fake.Now()); a.IdleSeconds != nil || a.RequestsInFlight != 1 || a.LastRequestAt != "2030-01-01T00:00:10.000Z" {
		t.Fatalf("an hour into a call: %+v", a)
	}
	c.modelEnded(fake.Now())
	fake.Advance(30 * time.Second)
	a := c.activity("x", fake.Now())
	if a.IdleSeconds == nil || *a.IdleSeconds != 30 || a.LastResponseAt != "2030-01-01T01:00:10.000Z" || a.Requests != 1 {
		t.Fatalf("30 s after the call: %+v", a)
	}
	fake.Advance(5 * time.Second)
	if a := c.activity("x", fake.Now()); *a.IdleSeconds != 35 {
		t.Errorf("idle did not grow: %d", *a.IdleSeconds)
	}
}
