package registry_test

import (
	"testing"

	"go.uber.org/goleak"
)

// A goroutine the package's code leaves running fails the package.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
