package relay

import (
	"testing"

	"go.uber.org/goleak"
)

// A relay goroutine that outlives its connections or its listener fails
// the package.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
