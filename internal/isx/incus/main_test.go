package incus_test

import (
	"testing"

	"github.com/incusspawn/isx/internal/isx/incustest"
)

// The client starts goroutines (background clean-ups, a log sweep); none
// may outlive the tests.
func TestMain(m *testing.M) { incustest.Main(m) }
