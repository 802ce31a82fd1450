package incustest

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Main runs a package's tests under goleak.VerifyTestMain, so that the run
// fails when they leave goroutines behind. Once the tests are done, the
// shared client's clean-ups are settled first, while the instances whose
// exec logs they delete still stand; then after runs (removing what the
// tests shared), and the client is closed: settled again and its idle
// connections, which are not leaks, dropped.
func Main(m *testing.M, after ...func()) {
	goleak.VerifyTestMain(run{m: m, after: after})
}

type run struct {
	m     *testing.M
	after []func()
}

func (r run) Run() int {
	code := r.m.Run()
	if err := settleClient(); err != nil {
		fmt.Fprintf(os.Stderr, "incustest: settling the shared client: %v\n", err)
		code = max(code, 1)
	}
	for _, f := range r.after {
		f()
	}
	clientMu.Lock()
	defer clientMu.Unlock()
	if client != nil {
		if err := client.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "incustest: closing the shared client: %v\n", err)
			code = max(code, 1)
		}
	}
	return code
}

func settleClient() error {
	clientMu.Lock()
	defer clientMu.Unlock()
	if client == nil {
		return nil
	}
	return client.Settle()
}
