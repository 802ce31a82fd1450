package metrics

import (
	"testing"
	"time"
)

// What metering one request costs the endpoint: the counter and the
// histogram of a series that exists, as every request after a server's
// first finds them.
func BenchmarkAnswered(b *testing.B) {
	m := New()
	m.Answered("default", "tools/call", 200, time.Millisecond)
	b.ReportAllocs()
	for b.Loop() {
		m.Answered("default", "tools/call", 200, time.Millisecond)
	}
}

// Metering allocates nothing per request once a series exists.
func TestAnsweredAllocatesNothing(t *testing.T) {
	m := New()
	m.Answered("default", "tools/call", 200, time.Millisecond)
	if n := testing.AllocsPerRun(100, func() { m.Answered("default", "tools/call", 200, time.Millisecond) }); n != 0 {
		t.Errorf("Answered allocates %v times per request", n)
	}
	m.Refused("mcp_rate_limited")
	if n := testing.AllocsPerRun(100, func() { m.Refused("mcp_rate_limited") }); n != 0 {
		t.Errorf("Refused allocates %v times per refusal", n)
	}
}
