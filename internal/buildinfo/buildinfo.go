// Package buildinfo says which build of a program is running, the same way
// for isx and actiond: its version, the commit it was built from, the Go
// version and the platform.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Info is what `isx version` and `actiond version` report of themselves.
type Info struct {
	Version  string `json:"version"`
	Commit   string `json:"commit,omitempty"`
	Modified bool   `json:"modified"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

// Read is the running build's info, with version as the program sets it.
func Read(version string) Info {
	info := Info{Version: version, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if build, ok := debug.ReadBuildInfo(); ok {
		for _, s := range build.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Commit = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
	}
	return info
}

// Line is the one line --version prints: "isx 1.2.3 (0123456789ab,
// modified) go1.25.0 linux/amd64".
func (info Info) Line(program string) string {
	line := program + " " + info.Version
	if info.Commit != "" {
		commit := info.Commit
		if len(commit) > 12 {
			commit = commit[:12]
		}
		if info.Modified {
			commit += ", modified"
		}
		line += " (" + commit + ")"
	}
	return line + " " + info.Go + " " + info.Platform
}
