package tui

import (
	"slices"
	"time"
)

// sparkBlocks draw a sparkline: the lowest for nothing, the others for a
// share of the largest value drawn.
var sparkBlocks = []rune("▁▂▃▄▅▆▇█")

// Sparkline draws values as one block each: ▁ for none, any other in
// proportion to the largest, which is █. isx proxy activity and mission
// control draw token spend per minute with it.
func Sparkline(values []int64) string {
	if len(values) == 0 {
		return ""
	}
	top := max(slices.Max(values), 1)
	out := make([]rune, len(values))
	for i, v := range values {
		step := int64(0)
		if v > 0 {
			step = min((v*int64(len(sparkBlocks)-1)+top-1)/top, int64(len(sparkBlocks)-1))
		}
		out[i] = sparkBlocks[step]
	}
	return string(out)
}

// spend is the instance's tokens per minute as of now: the reading's,
// moved on by the minutes of the clock that passed since it arrived, in
// which the proxy would have said had anything been spent.
func (r *reading) spend(name string, now time.Time) []int64 {
	if r == nil {
		return nil
	}
	values := r.counts[name].TokensPerMinute
	passed := int(now.Unix()/60 - r.at.Unix()/60)
	if len(values) == 0 || passed <= 0 {
		return values
	}
	moved := make([]int64, len(values))
	if passed < len(values) {
		copy(moved, values[passed:])
	}
	return moved
}
