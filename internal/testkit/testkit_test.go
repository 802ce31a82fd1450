package testkit

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		d    Durations
		want time.Duration
	}{
		{nil, 0},
		{Durations{3, 1, 2}, 2},
		{Durations{4, 1, 3, 2}, 3},
	} {
		if got := c.d.Median(); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.d, got, c.want)
		}
	}
}

func TestSyncBufferTakesConcurrentWrites(t *testing.T) {
	var b SyncBuffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				b.Write([]byte("x")) //nolint:errcheck // never fails
			}
		})
	}
	wg.Wait()
	if n := len(b.String()); n != 800 {
		t.Errorf("%d bytes, want 800", n)
	}
}

// UPDATE_GOLDEN=1 writes the file that a later run compares with.
func TestGoldenWritesThenCompares(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv(UpdateGolden, "1")
	Golden(t, "sub/out.txt", "hello\n")
	raw, err := os.ReadFile(filepath.Join("testdata", "sub", "out.txt"))
	if err != nil || string(raw) != "hello\n" {
		t.Fatalf("written %q, %v", raw, err)
	}
	t.Setenv(UpdateGolden, "")
	Golden(t, "sub/out.txt", "hello\n")
}

// PromtoolCheck passes a clean exposition and fails one promtool lints.
func TestPromtoolCheck(t *testing.T) {
	PromtoolCheck(t, []byte("# HELP good_total A counter.\n# TYPE good_total counter\ngood_total 1\n"))
	inner := &testing.T{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		PromtoolCheck(inner, []byte("# HELP bad_count A counter.\n# TYPE bad_count counter\nbad_count 1\n"))
	}()
	<-done
	if !inner.Failed() {
		t.Error("promtool passed a counter without _total")
	}
}
