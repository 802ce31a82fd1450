package incus_test

import (
	"bytes"
	"strings"
	"sync"
	"testing"

	"github.com/incusspawn/isx/internal/isx/incus"
)

// signalBuffer is a writer that says when it first holds want.
type signalBuffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
}

func newSignalBuffer(want string) *signalBuffer {
	return &signalBuffer{want: want, seen: make(chan struct{})}
}

func (b *signalBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	had := strings.Contains(b.buf.String(), b.want)
	b.buf.Write(p)
	if !had && strings.Contains(b.buf.String(), b.want) {
		close(b.seen)
	}
	return len(p), nil
}

func (b *signalBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Exec gives a command's output to ExecRequest.Stdout and Stderr while it
// runs: the first line arrives while the command waits for a file only the
// test makes once it has seen that line, and the rest arrives by the end.
func TestExecFollowsOutput(t *testing.T) {
	t.Parallel()
	for _, image := range execImages {
		t.Run(image.name, func(t *testing.T) {
			t.Parallel()
			c, name := execInstance(t, image.alias)
			ctx := testContext(t)
			stdout, stderr := newSignalBuffer("first\n"), newSignalBuffer("second\n")
			script := "echo first; while [ ! -e /var/tmp/go ]; do sleep 0.05; done; echo second >&2; echo third"
			type outcome struct {
				res *incus.ExecResult
				err error
			}
			ended := make(chan outcome, 1)
			go func() {
				res, err := c.Exec(ctx, name, incus.ExecRequest{Command: []string{"sh", "-c", script}, Stdout: stdout, Stderr: stderr})
				ended <- outcome{res, err}
			}()
			select {
			case <-stdout.seen:
			case o := <-ended:
				t.Fatalf("the command ended before its first line was followed: %+v %v", o.res, o.err)
			case <-ctx.Done():
				t.Fatalf("the first line never arrived; stdout so far %q", stdout.String())
			}
			if got := stderr.String(); got != "" {
				t.Errorf("stderr before the command wrote to it: %q", got)
			}
			if err := c.PushFile(ctx, name, "/var/tmp/go", strings.NewReader(""), incus.FileOptions{Mode: 0o644}); err != nil {
				t.Fatal(err)
			}
			o := <-ended
			if o.err != nil {
				t.Fatal(o.err)
			}
			if got := stdout.String(); got != "first\nthird\n" || string(o.res.Stdout) != got {
				t.Errorf("stdout followed %q, collected %q", got, o.res.Stdout)
			}
			if got := stderr.String(); got != "second\n" || string(o.res.Stderr) != got {
				t.Errorf("stderr followed %q, collected %q", got, o.res.Stderr)
			}
			mustExec(t, c, name, incus.ExecRequest{Command: []string{"rm", "/var/tmp/go"}})
			assertNoLeftovers(t, c, name)
		})
	}
}
