package action

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"time"
)

var isoDuration = regexp.MustCompile(`^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$`)

// ParseDuration reads a Go duration ("90s", "1m30s", "10m") or an ISO 8601
// duration of days, hours, minutes and seconds ("PT1M", "PT1H30M", "P1D",
// "PT0.5S").
func ParseDuration(text string) (time.Duration, error) {
	if d, err := time.ParseDuration(text); err == nil {
		return d, nil
	}
	parts := isoDuration.FindStringSubmatch(text)
	if parts == nil || text == "P" || text == "PT" || text[len(text)-1] == 'T' {
		return 0, fmt.Errorf("%q is not a duration: write it like \"90s\", \"10m\" or \"PT1M\"", text)
	}
	total := 0.0
	for i, unit := range []time.Duration{24 * time.Hour, time.Hour, time.Minute, time.Second} {
		if parts[i+1] == "" {
			continue
		}
		n, err := strconv.ParseFloat(parts[i+1], 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration: %w", text, err)
		}
		total += n * float64(unit)
	}
	if total > math.MaxInt64 {
		return 0, fmt.Errorf("%q is too long a duration", text)
	}
	return time.Duration(total), nil
}
