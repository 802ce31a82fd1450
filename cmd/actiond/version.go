package main

import (
	"encoding/json"
	"fmt"

	"github.com/incusspawn/isx/internal/buildinfo"
	"github.com/spf13/cobra"
)

// version is set at link time (-ldflags "-X main.version=1.2.3"); a build
// from a checkout says dev and names its commit.
var version = "dev"

func readBuildInfo() buildinfo.Info { return buildinfo.Read(version) }

func versionLine() string { return readBuildInfo().Line("actiond") }

func (a *app) versionCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print actiond's version, commit and Go version",
		Args:  noArgs,
		RunE: func(*cobra.Command, []string) error {
			if asJSON {
				return writeJSON(a.stdout, readBuildInfo())
			}
			_, err := fmt.Fprintln(a.stdout, versionLine())
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return cmd
}

func writeJSON(w interface{ Write([]byte) (int, error) }, v any) error {
	encoder := json.NewEncoder(w)
	encoder.SetIndent("", "  ")
	return encoder.Encode(v)
}
