package instance

import (
	"fmt"
	"time"
)

// Age says how long ago, in the largest whole unit, as kubectl does: 45s,
// 12m, 3h, 5d. The CLI's list and the TUI show ages the same way.
func Age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}
