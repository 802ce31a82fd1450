package testkit

import (
	"slices"
	"testing"
	"time"
)

// Durations collects timed benchmark iterations, for their median: one
// slow iteration on a loaded machine moves a mean, not the median.
type Durations []time.Duration

// Median is the middle duration (the upper one of an even count), 0 for
// none.
func (d Durations) Median() time.Duration { return Median(d) }

// Median is the middle of any measured values (the upper one of an even
// count), 0 for none: requests per second, RSS, CPU as much as durations.
func Median[T int64 | float64 | time.Duration](values []T) T {
	if len(values) == 0 {
		return 0
	}
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	return sorted[len(sorted)/2]
}

// Report reports the median as the benchmark's median-ms.
func (d Durations) Report(b *testing.B) {
	b.ReportMetric(float64(d.Median().Microseconds())/1000, "median-ms")
}

// Timed runs fn with the benchmark timer on and records how long it took.
func (d *Durations) Timed(b *testing.B, fn func()) {
	b.StartTimer()
	began := time.Now()
	fn()
	*d = append(*d, time.Since(began))
	b.StopTimer()
}
