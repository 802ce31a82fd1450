package main

import (
	"testing"

	"go.uber.org/goleak"
)

// A goroutine the proxy leaves running fails the package.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
