package process

import (
	"os"
	"os/exec"
	"testing"
)

func TestAliveTellsReusedAndGonePidsApart(t *testing.T) {
	self, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !Alive(os.Getpid(), self.Start) {
		t.Fatal("this process does not read as alive")
	}
	if Alive(os.Getpid(), self.Start+"1") {
		t.Fatal("a different start time (a reused pid) reads as alive")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(cmd.Process.Pid); err != ErrGone {
		t.Fatalf("a reaped process: got %v, want ErrGone", err)
	}
	if Alive(cmd.Process.Pid, "1") {
		t.Fatal("a reaped process reads as alive")
	}
}
