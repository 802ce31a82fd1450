package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"

	"github.com/incusspawn/isx/internal/isx/build"
)

// buildInfo is what `isx version` reports of isx itself.
type buildInfo struct {
	Version  string `json:"version"`
	Commit   string `json:"commit,omitempty"`
	Modified bool   `json:"modified"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

// incusInfo is what `isx version` reports of the Incus daemon.
type incusInfo struct {
	Socket     string `json:"socket"`
	Project    string `json:"project"`
	Version    string `json:"version,omitempty"`
	APIVersion string `json:"apiVersion,omitempty"`
	Error      string `json:"error,omitempty"`
}

type versionReport struct {
	buildInfo
	Incus incusInfo `json:"incus"`
}

func readBuildInfo() buildInfo {
	info := buildInfo{Version: build.Version, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if b, ok := debug.ReadBuildInfo(); ok {
		for _, s := range b.Settings {
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

// versionLine is isx's own version, as --version prints it: the same
// line as actiond's.
func versionLine() string {
	info := readBuildInfo()
	line := "isx " + info.Version
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

// versionTimeout bounds asking Incus for its version.
const versionTimeout = 10 * time.Second

func newVersionCommand(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version [--json]",
		Short: "Print isx's version and the Incus server's",
		Long: "version prints isx's version, commit, Go version and platform, then the version\n" +
			"of the Incus daemon isx talks to, on which socket and in which project. When\n" +
			"Incus does not answer it says why and exits 3, after printing isx's own.",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			report, err := a.versions(cmd.Context())
			if asJSON {
				if jsonErr := writeJSON(a.stdout, report); jsonErr != nil {
					return jsonErr
				}
			} else {
				fmt.Fprintln(a.stdout, versionLine())
				if err == nil {
					fmt.Fprintf(a.stdout, "Incus %s (API %s) on %s, project %s\n", report.Incus.Version, report.Incus.APIVersion, report.Incus.Socket, report.Incus.Project)
				}
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return cmd
}

// versions asks Incus for its version; the report holds isx's either way.
func (a *app) versions(ctx context.Context) (versionReport, error) {
	report := versionReport{buildInfo: readBuildInfo()}
	cfg, err := a.config()
	if err != nil {
		return report, err
	}
	report.Incus = incusInfo{Socket: a.socket(cfg), Project: a.project(cfg)}
	client, err := a.incus()
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, versionTimeout)
		defer cancel()
		server, serverErr := client.Server(ctx)
		if err = serverErr; err == nil {
			report.Incus.Version, report.Incus.APIVersion = server.Environment.ServerVersion, server.APIVersion
		}
	}
	if err != nil {
		report.Incus.Error = err.Error()
	}
	return report, err
}

func writeJSON(w io.Writer, v any) error {
	encoder := json.NewEncoder(w)
	encoder.SetIndent("", "  ")
	return encoder.Encode(v)
}
