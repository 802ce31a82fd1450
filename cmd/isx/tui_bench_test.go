package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/incusspawn/isx/internal/testkit"
)

// BenchmarkTUI/first-screen times `isx` on an 80x24 terminal from its
// start to the first full screen (the lists with all 50 instances read)
// over the 50 instances of BenchmarkList, and reports the process's
// resident memory and CPU while it then sits idle. BenchmarkTUI/isx-list
// is the baseline in the same run: `isx list` over the same instances, and
// its peak resident memory.
func BenchmarkTUI(b *testing.B) {
	_, x := fiftyInstances(b)
	b.Run("first-screen", func(b *testing.B) {
		var d testkit.Durations
		var rss, cpu []float64
		b.StopTimer()
		for i := 0; i < b.N; i++ {
			run := startTUI(b, x)
			d.Timed(b, func() { run.waitFor("50 instances") })
			kib, perSecond := run.idle()
			rss, cpu = append(rss, kib), append(cpu, perSecond)
			run.quit()
		}
		d.Report(b)
		b.ReportMetric(testkit.Median(rss), "idle-RSS-KiB")
		b.ReportMetric(testkit.Median(cpu), "idle-CPU-ms/s")
	})
	b.Run("isx-list", func(b *testing.B) {
		var d testkit.Durations
		var rss []float64
		b.StopTimer()
		for i := 0; i < b.N; i++ {
			cmd := x.command(benchContext(b), "list")
			d.Timed(b, func() {
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("isx list: %v\n%s", err, out)
				}
			})
			rss = append(rss, float64(maxRSS(cmd)))
		}
		d.Report(b)
		b.ReportMetric(testkit.Median(rss), "peak-RSS-KiB")
	})
}

// maxRSS is the peak resident memory of a finished command, in KiB.
func maxRSS(cmd *exec.Cmd) int64 {
	if usage, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		return usage.Maxrss
	}
	return 0
}

// tuiRun is isx on a pseudo-terminal, its output collected.
type tuiRun struct {
	b    *testing.B
	cmd  *exec.Cmd
	tty  *os.File
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
}

func startTUI(b *testing.B, x *cli) *tuiRun {
	b.Helper()
	cmd := x.command(benchContext(b))
	cmd.Env = append(cmd.Env, "TERM=xterm-256color")
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 80, Rows: 24})
	if err != nil {
		b.Fatal(err)
	}
	r := &tuiRun{b: b, cmd: cmd, tty: tty, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		buf := make([]byte, 32<<10)
		for {
			n, err := tty.Read(buf)
			r.mu.Lock()
			r.out.Write(buf[:n])
			r.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return r
}

func (r *tuiRun) waitFor(want string) {
	r.b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := incustest.Poll(ctx, time.Millisecond, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return bytes.Contains(r.out.Bytes(), []byte(want))
	})
	if err != nil {
		r.b.Fatalf("isx never showed %q", want)
	}
}

// idle waits until the process has used (almost) no CPU for a second, then
// returns its resident memory and the CPU it uses per second over the
// next two seconds.
func (r *tuiRun) idle() (rssKiB, cpuMillisPerSecond float64) {
	r.b.Helper()
	pid := r.cmd.Process.Pid
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	last, lastAt := cpuTicks(r.b, pid), time.Now()
	err := incustest.Poll(ctx, 100*time.Millisecond, func() bool {
		if time.Since(lastAt) < time.Second {
			return false
		}
		now := cpuTicks(r.b, pid)
		quiet := now-last <= 1
		last, lastAt = now, time.Now()
		return quiet
	})
	if err != nil {
		r.b.Fatal("isx never went idle")
	}
	rssKiB = float64(statusKiB(r.b, pid, "VmRSS:"))
	began, beganAt := cpuTicks(r.b, pid), time.Now()
	measure, stop := context.WithTimeout(context.Background(), 2*time.Second)
	defer stop()
	<-measure.Done()
	ticks := cpuTicks(r.b, pid) - began
	// Linux counts CPU time in ticks of 10 ms (USER_HZ 100).
	return rssKiB, float64(ticks*10) / time.Since(beganAt).Seconds()
}

func (r *tuiRun) quit() {
	r.b.Helper()
	if _, err := io.WriteString(r.tty, "q"); err != nil {
		r.b.Fatal(err)
	}
	if err := r.cmd.Wait(); err != nil {
		r.b.Fatalf("isx: %v", err)
	}
	r.tty.Close()
	<-r.done
}

// cpuTicks is a process's user and system time, in clock ticks.
func cpuTicks(b *testing.B, pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return utime + stime
}

func statusKiB(b *testing.B, pid int, field string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kib, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kib
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
