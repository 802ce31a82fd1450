package warm_test

import (
	"testing"

	"github.com/incusspawn/isx/internal/isx/incustest"
)

// The pool's Run and the Incus client start goroutines; none may outlive
// the tests.
func TestMain(m *testing.M) { incustest.Main(m) }
