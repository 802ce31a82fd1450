package buildinfo

import (
	"runtime"
	"strings"
	"testing"
)

func TestLine(t *testing.T) {
	info := Info{Version: "1.2.3", Commit: "0123456789abcdef", Modified: true, Go: "go1.25.0", Platform: "linux/amd64"}
	if got, want := info.Line("isx"), "isx 1.2.3 (0123456789ab, modified) go1.25.0 linux/amd64"; got != want {
		t.Errorf("Line = %q, want %q", got, want)
	}
	info.Commit = ""
	if got, want := info.Line("actiond"), "actiond 1.2.3 go1.25.0 linux/amd64"; got != want {
		t.Errorf("Line without a commit = %q, want %q", got, want)
	}
}

func TestRead(t *testing.T) {
	info := Read("dev")
	if info.Version != "dev" || info.Go != runtime.Version() || !strings.Contains(info.Platform, "/") {
		t.Errorf("Read = %+v", info)
	}
}
