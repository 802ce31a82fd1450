package explorer_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The tests start actiond in process and a browser; what either leaves
// running fails the package.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
