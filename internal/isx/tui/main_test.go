package tui

import (
	"testing"

	"go.uber.org/goleak"
)

// The TUI's runtime starts goroutines; none may outlive a test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
