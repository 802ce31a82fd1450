// Package buildinfo says which build of a program is running, the same way
// for isx and actiond: its version, the commit it was built from, the Go
// version and the platform.
//
// The commit is what `go build` stamps into the binary from the git
// checkout it builds in (runtime/debug.ReadBuildInfo's vcs.revision,
// vcs.time and vcs.modified), so there is nothing to pass by hand. Go
// stamps nothing under -buildvcs=false, for `go run` and tests, and in a
// checkout it does not recognise (a git worktree, whose .git is a file);
// the version line then says the commit is unknown rather than leave it
// out.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Info is what `isx version` and `actiond version` report of themselves.
type Info struct {
	Version string `json:"version"`
	// Commit is the git commit built; CommitTime its commit time (RFC 3339,
	// UTC); Modified whether the checkout had changes besides it.
	Commit     string `json:"commit,omitempty"`
	CommitTime string `json:"commitTime,omitempty"`
	Modified   bool   `json:"modified"`
	Go         string `json:"go"`
	Platform   string `json:"platform"`
}

// Read is the running build's info, with version as the program sets it.
func Read(version string) Info {
	info := Info{Version: version, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if build, ok := debug.ReadBuildInfo(); ok {
		info.stamp(build.Settings)
	}
	return info
}

// stamp reads the VCS settings `go build` recorded.
func (info *Info) stamp(settings []debug.BuildSetting) {
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			info.Commit = s.Value
		case "vcs.time":
			info.CommitTime = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
}

// Unstamped is what the version line says of a build without VCS
// information.
const Unstamped = "commit unknown: built without VCS information"

// Line is the one line --version prints: "isx 1.2.3 (0123456789ab,
// 2026-07-28T10:00:00Z, modified) go1.25.0 linux/amd64".
func (info Info) Line(program string) string {
	line := program + " " + info.Version
	if info.Commit == "" {
		return line + " (" + Unstamped + ") " + info.Go + " " + info.Platform
	}
	commit := info.Commit
	if len(commit) > 12 {
		commit = commit[:12]
	}
	if info.CommitTime != "" {
		commit += ", " + info.CommitTime
	}
	if info.Modified {
		commit += ", modified"
	}
	return line + " (" + commit + ") " + info.Go + " " + info.Platform
}
