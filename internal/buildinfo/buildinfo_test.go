package buildinfo

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/sourcetree"
)

func TestLine(t *testing.T) {
	info := Info{Version: "1.2.3", Commit: "0123456789abcdef", CommitTime: "2026-07-28T10:00:00Z", Modified: true, Go: "go1.25.0", Platform: "linux/amd64"}
	if got, want := info.Line("isx"), "isx 1.2.3 (0123456789ab, 2026-07-28T10:00:00Z, modified) go1.25.0 linux/amd64"; got != want {
		t.Errorf("Line = %q, want %q", got, want)
	}
	info.Commit = ""
	if got, want := info.Line("actiond"), "actiond 1.2.3 (commit unknown: built without VCS information) go1.25.0 linux/amd64"; got != want {
		t.Errorf("Line without a commit = %q, want %q", got, want)
	}
}

func TestRead(t *testing.T) {
	info := Read("dev")
	if info.Version != "dev" || info.Go != runtime.Version() || !strings.Contains(info.Platform, "/") {
		t.Errorf("Read = %+v", info)
	}
	info.stamp([]debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "abc"}, {Key: "vcs.time", Value: "2026-07-28T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}})
	if info.Commit != "abc" || info.CommitTime != "2026-07-28T10:00:00Z" || !info.Modified {
		t.Errorf("stamped = %+v", info)
	}
}

// commitTime is the commit time of the checkout the binaries are built
// from, as git and then Go record it.
const commitTime = "2026-07-28T10:00:00Z"

// Both real binaries, built by `go build` in a git checkout, name that
// checkout's commit, its time and whether it had changes, in `version`,
// `--version` and `version --json`; built without VCS information they say
// the commit is unknown.
func TestBinariesNameTheirCommit(t *testing.T) {
	src, commit := checkout(t)
	bin := t.TempDir()
	build(t, src, bin, "-buildvcs=true", "actiond", "isx")

	for _, program := range []string{"actiond", "isx"} {
		line := run(t, src, filepath.Join(bin, program), "--version")
		if want := program + " "; !strings.HasPrefix(line, want) || !strings.Contains(line, " ("+commit[:12]+", "+commitTime+") go") {
			t.Errorf("%s --version = %q, want the commit %s and its time %s", program, line, commit[:12], commitTime)
		}
		var info Info
		if err := json.Unmarshal([]byte(run(t, src, filepath.Join(bin, program), "version", "--json")), &info); err != nil {
			t.Fatalf("%s version --json: %v", program, err)
		}
		if info.Commit != commit || info.CommitTime != commitTime || info.Modified {
			t.Errorf("%s version --json = %+v, want commit %s at %s, unmodified", program, info, commit, commitTime)
		}
	}
	if line := run(t, src, filepath.Join(bin, "actiond"), "version"); !strings.Contains(line, commit[:12]) {
		t.Errorf("actiond version = %q", line)
	}

	// A change not committed: the build says it is modified.
	if err := os.WriteFile(filepath.Join(src, "go.mod"), append(read(t, filepath.Join(src, "go.mod")), "\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	build(t, src, bin, "-buildvcs=true", "actiond")
	if line := run(t, src, filepath.Join(bin, "actiond"), "--version"); !strings.Contains(line, commitTime+", modified) go") {
		t.Errorf("a modified checkout: %q", line)
	}

	build(t, src, bin, "-buildvcs=false", "actiond", "isx")
	for _, program := range []string{"actiond", "isx"} {
		if line := run(t, src, filepath.Join(bin, program), "--version"); !strings.Contains(line, "("+Unstamped+")") {
			t.Errorf("%s built without VCS information: %q", program, line)
		}
	}
}

// checkout copies the module's files, the ones git tracks and the new
// ones it does not ignore, as they are on disk, into a new git repository
// whose one commit it returns: the tree under test is not always a
// checkout Go stamps (a worktree's .git is a file, which Go does not
// follow).
func checkout(t *testing.T) (dir, commit string) {
	t.Helper()
	root, err := sourcetree.Root()
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	list := git(t, root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	for _, name := range strings.Split(strings.TrimRight(list, "\x00"), "\x00") {
		from := filepath.Join(root, name)
		info, err := os.Lstat(from)
		if err != nil || !info.Mode().IsRegular() {
			continue // deleted but not yet committed, or a link
		}
		to := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, read(t, from), info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	git(t, dir, "init", "-q")
	git(t, dir, "add", "-A")
	git(t, dir, "-c", "user.name=build", "-c", "user.email=build@example.invalid", "commit", "-q", "-m", "the tree under test")
	return dir, strings.TrimSpace(git(t, dir, "rev-parse", "HEAD"))
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_DATE="+commitTime, "GIT_COMMITTER_DATE="+commitTime, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, stderr.String())
	}
	return string(out)
}

// build builds both programs as a person does, with go build in the
// checkout; vcs is -buildvcs=true or -buildvcs=false, which overrides a
// GOFLAGS default either way.
func build(t *testing.T, src, bin, vcs string, programs ...string) {
	t.Helper()
	for _, program := range programs {
		t.Logf("go build %s ./cmd/%s", vcs, program)
		cmd := exec.Command("go", "build", vcs, "-trimpath", "-o", filepath.Join(bin, program), "./cmd/"+program)
		cmd.Dir = src
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build ./cmd/%s: %v\n%s", program, err, out)
		}
	}
}

// run runs a program with no configuration of its own to read; isx's
// version reports itself first even when Incus does not answer.
func run(t *testing.T, dir, binary string, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH"), "INCUS_SOCKET=/nonexistent/unix.socket"}
	out, err := cmd.Output()
	if _, exited := err.(*exec.ExitError); err != nil && !exited {
		t.Fatalf("%s %v: %v", binary, args, err)
	}
	return strings.TrimSpace(string(out))
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
