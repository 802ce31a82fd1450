package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/incusspawn/isx/internal/isx/instance"
)

func TestSparkline(t *testing.T) {
	for _, c := range []struct {
		values []int64
		want   string
	}{
		{nil, ""},
		{[]int64{0, 0, 0}, "▁▁▁"},
		{[]int64{0, 1, 0}, "▁█▁"},
		{[]int64{0, 1, 7, 14, 100}, "▁▂▂▂█"},
		{[]int64{70, 10, 35, 69}, "█▂▅█"},
	} {
		if got := Sparkline(c.values); got != c.want {
			t.Errorf("Sparkline(%v) = %q, want %q", c.values, got, c.want)
		}
	}
}

// Mission control draws each instance's tokens per minute as a sparkline
// that moves on with the clock between the proxy's readings (issue 25);
// on a narrow terminal, the selected instance's below the table.
func TestMissionSparkline(t *testing.T) {
	m, clk := testModel(t, 160, 24, someProxy{})
	narrow, _ := testModel(t, 80, 24, someProxy{})
	held := entry("mcp-test-work-abcde", "Running", map[string]string{
		instance.KeyMCPOwner: "alice", instance.KeyMCPSession: "stdio:1:1", instance.KeyMCPPurpose: "#1",
	})
	for _, model := range []*model{m, narrow} {
		model.Update(listingMsg{listing: listing(held)})
		model.Update(activityMsg{at: clk.Now(), counts: map[string]Activity{
			held.Name: {Requests: 4, InputTokens: 800, TokensPerMinute: []int64{0, 0, 100, 0, 800}},
		}})
		press(model, "f4")
	}
	if view := ansi.Strip(narrow.render()); strings.Contains(view, "PER MINUTE") || !strings.Contains(view, "(ended) · tokens per minute: ▁▁▂▁█") {
		t.Errorf("at 80 columns the sparkline is not below the table:\n%s", view)
	}
	if line := lineWith(m.render(), held.Name); !strings.Contains(line, " ▁▁▂▁█ ") {
		t.Errorf("no sparkline of 0, 0, 100, 0, 800 tokens: %q", line)
	}
	if view := ansi.Strip(m.render()); !strings.Contains(view, "PER MINUTE") {
		t.Errorf("no PER MINUTE column:\n%s", view)
	}
	clk.Advance(2 * time.Minute)
	if line := lineWith(m.render(), held.Name); !strings.Contains(line, " ▂▁█▁▁ ") {
		t.Errorf("two minutes later the line has not moved on: %q", line)
	}
}
