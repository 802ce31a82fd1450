package server_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
)

// binary is cmd/actiond, built once for the tests that run it as a process.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "actiond-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary, err = at.Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	// A goroutine the server leaves running fails the package.
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}
