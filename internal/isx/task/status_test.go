package task

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/coded"
)

func TestNewIDIsValidAndDrawnFromTheSource(t *testing.T) {
	id, err := NewID(bytes.NewReader(make([]byte, 7)))
	if err != nil || id != "t-aaaaaaaaaa" {
		t.Errorf("NewID(zeros) = %q, %v", id, err)
	}
	id, err = NewID(bytes.NewReader(bytes.Repeat([]byte{0xff}, 7)))
	if err != nil || id != "t-7777777777" || ValidateID(id) != nil {
		t.Errorf("NewID(ones) = %q, %v", id, err)
	}
	if _, err := NewID(bytes.NewReader(nil)); err == nil {
		t.Errorf("NewID from an empty source succeeded")
	}
}

// ISX-156, ISX-157, ISX-158: keys of 1 to 64 characters of A-Za-z0-9._:-.
func TestValidateKey(t *testing.T) {
	good := []string{"a", "A-z_0.9:x", strings.Repeat("k", 64), "job:2026-11-30T12:00.run_1"}
	for _, key := range good {
		if err := ValidateKey(key); err != nil {
			t.Errorf("ValidateKey(%q): %v", key, err)
		}
	}
	bad := []string{"", strings.Repeat("k", 65), "a/b", "a b", "ä", "a\n", "$(x)", "a;b", "..\\x"}
	for _, key := range bad {
		if err := ValidateKey(key); coded.CodeOf(err) != CodeInvalidArgument {
			t.Errorf("ValidateKey(%q) = %v, want invalid_argument", key, err)
		}
	}
}

func TestValidateID(t *testing.T) {
	for _, id := range []string{"t-aaaaaaaaaa", "t-234567abcd"} {
		if err := ValidateID(id); err != nil {
			t.Errorf("ValidateID(%q): %v", id, err)
		}
	}
	for _, id := range []string{"", "t-", "t-aaaaaaaaa", "t-aaaaaaaaaaa", "t-aaaaaaaaa1", "t-AAAAAAAAAA", "x-aaaaaaaaaa", "t-aaaaaaaaaa\n", " t-aaaaaaaaaa", "t-aaaaa/aaaa"} {
		if err := ValidateID(id); coded.CodeOf(err) != CodeInvalidArgument {
			t.Errorf("ValidateID(%q) = %v, want invalid_argument", id, err)
		}
	}
}

const recordLine = `record t-aaaaaaaaaa {"version":1,"id":"t-aaaaaaaaaa","kind":"%s","command":["true"],"cwd":"/home/agent","created":"2026-11-30T12:00:00Z"}`

func oneStatus(t *testing.T, out string) Info {
	t.Helper()
	a, err := parseAnswer(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.tasks) != 1 {
		t.Fatalf("%d tasks in %q", len(a.tasks), out)
	}
	return a.tasks[0].status()
}

// ISX-120, ISX-127: the states read from an instance are the seed's words,
// never unknown.
func TestStatusFromFacts(t *testing.T) {
	command := strings.Replace(recordLine, "%s", "command", 1)
	delegate := strings.Replace(recordLine, "%s", "delegate", 1)
	cases := []struct {
		name     string
		out      string
		state    State
		exit     int
		pending  bool
		problem  bool
		finished bool
	}{
		{"lost", "task t-aaaaaaaaaa state=lost run=- exit=- ended=- attached=0 mode=- out=- err=-\n", StateLost, 0, false, false, false},
		{"running", "task t-aaaaaaaaaa state=running run=1 exit=- ended=- attached=0 mode=systemd out=3 err=0\n" + command, StateRunning, 0, false, false, false},
		{"pending", "task t-aaaaaaaaaa state=pending run=1 exit=- ended=- attached=0 mode=- out=0 err=0\n" + command, StateRunning, 0, true, false, false},
		{"finished", "task t-aaaaaaaaaa state=finished run=1 exit=3 ended=1796052405 attached=0 mode=process out=0 err=0\n" + command, StateFinished, 3, false, false, true},
		{"no exit code", "task t-aaaaaaaaaa state=finished run=1 exit=-1 ended=1796052405 attached=0 mode=process out=0 err=0\n" + command, StateFinished, NoExitCode, false, false, true},
		{"damaged exit file", "task t-aaaaaaaaaa state=finished run=1 exit=x ended=- attached=0 mode=process out=0 err=0\n" + command, StateFinished, NoExitCode, false, true, false},
		{"vanished", "task t-aaaaaaaaaa state=vanished run=1 exit=- ended=- attached=0 mode=process out=0 err=0\n" + command, StateFinished, NoExitCode, false, true, false},
		{"attached delegate", "task t-aaaaaaaaaa state=finished run=2 exit=0 ended=1 attached=1 mode=systemd out=0 err=0\n" + delegate, StateAttached, 0, false, false, true},
		{"attached command stays finished", "task t-aaaaaaaaaa state=finished run=1 exit=0 ended=1 attached=1 mode=systemd out=0 err=0\n" + command, StateFinished, 0, false, false, true},
		{"damaged run number", "task t-aaaaaaaaaa state=bad run=- exit=- ended=- attached=0 mode=- out=- err=-\n" + command, StateLost, 0, false, true, false},
		{"damaged record", "task t-aaaaaaaaaa state=running run=1 exit=- ended=- attached=0 mode=systemd out=0 err=0\nrecord t-aaaaaaaaaa {not json\n", StateRunning, 0, false, true, false},
		{"record of another task", "task t-aaaaaaaaaa state=running run=1 exit=- ended=- attached=0 mode=systemd out=0 err=0\n" + strings.Replace(command, `"id":"t-aaaaaaaaaa"`, `"id":"t-bbbbbbbbbb"`, 1), StateRunning, 0, false, true, false},
		{"unknown state word", "task t-aaaaaaaaaa state=unknown run=1 exit=- ended=- attached=0 mode=- out=0 err=0\n" + command, StateLost, 0, false, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := oneStatus(t, c.out)
			if st.State != c.state || st.Pending != c.pending || (st.Problem != "") != c.problem || !st.Finished.IsZero() != c.finished {
				t.Errorf("%+v, want state %s pending %v problem %v finished-time %v", st, c.state, c.pending, c.problem, c.finished)
			}
			if (c.state == StateFinished || c.state == StateAttached) && st.ExitCode != c.exit {
				t.Errorf("exit code %d, want %d", st.ExitCode, c.exit)
			}
			if st.State == StateUnknown {
				t.Errorf("a state read from the instance is unknown")
			}
		})
	}
}

func TestStatusKeepsRecordAcrossLaterFacts(t *testing.T) {
	out := "task t-aaaaaaaaaa state=pending run=1 exit=- ended=- attached=0 mode=systemd out=- err=-\n" +
		strings.Replace(recordLine, "%s", "command", 1) + "\n" +
		`runinfo t-aaaaaaaaaa {"run":1,"unit":"isx-task-t-aaaaaaaaaa-1.service","mode":"systemd","started":"2026-11-30T12:00:01Z"}` + "\n" +
		"launch t-aaaaaaaaaa 1\n" +
		"task t-aaaaaaaaaa state=running run=1 exit=- ended=- attached=0 mode=systemd out=0 err=0\n"
	st := oneStatus(t, out)
	if st.State != StateRunning || st.Pending || st.Record == nil || st.Mode != modeSystemd ||
		!st.Started.Equal(time.Date(2026, 11, 30, 12, 0, 1, 0, time.UTC)) || st.StdoutBytes != 0 {
		t.Errorf("%+v", st)
	}
}

// Output from inside the instance is checked, never trusted to be well formed.
func TestParseAnswerRefusesWhatItDoesNotKnow(t *testing.T) {
	for _, out := range []string{
		"hello\n",
		"task ../../etc state=running\n",
		"task t-aaaaaaaaaa state\n",
		"record t-bbbbbbbbbb {}\n",
	} {
		if _, err := parseAnswer(out); err == nil {
			t.Errorf("parseAnswer(%q) succeeded", out)
		}
	}
	a, err := parseAnswer("error busy someone else is starting it\n")
	if err != nil || a.errCode != CodeBusy || a.errText != "someone else is starting it" {
		t.Errorf("error line: %+v, %v", a, err)
	}
}
