package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/incusspawn/isx/internal/buildinfo"
	"github.com/incusspawn/isx/internal/isx/build"
)

// incusInfo is what `isx version` reports of the Incus daemon.
type incusInfo struct {
	Socket     string `json:"socket"`
	Project    string `json:"project"`
	Version    string `json:"version,omitempty"`
	APIVersion string `json:"apiVersion,omitempty"`
	Error      string `json:"error,omitempty"`
}

type versionReport struct {
	buildinfo.Info
	Incus incusInfo `json:"incus"`
}

func readBuildInfo() buildinfo.Info { return buildinfo.Read(build.Version) }

// versionLine is isx's own version, as --version prints it: the same
// line as actiond's.
func versionLine() string { return readBuildInfo().Line("isx") }

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
	report := versionReport{Info: readBuildInfo()}
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
