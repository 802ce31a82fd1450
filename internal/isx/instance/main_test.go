package instance_test

import (
	"testing"

	"github.com/incusspawn/isx/internal/isx/incustest"
)

// The Incus client these tests drive starts goroutines; none may outlive
// the tests.
func TestMain(m *testing.M) { incustest.Main(m) }
