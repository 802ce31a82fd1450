package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/incusspawn/isx/internal/isx/build"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/template"
)

func newListCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List templates and instances",
		Long: "list shows the templates (built, stale or not built) and the instances isx made,\n" +
			"with their template and state. An MCP column appears while any instance has\n" +
			"isx mcp stamps: held: <purpose>, orphaned, or kept: <purpose>.",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			client, err := a.incus()
			if err != nil {
				return err
			}
			listing, err := collectListing(cmd.Context(), client, a.templatesOrWarn())
			if err != nil {
				return err
			}
			return listing.write(a.stdout)
		},
	}
}

// listing is what `isx list` prints.
type listing struct {
	templates []templateRow
	instances []instance.Entry
	notes     []string
}

type templateRow struct {
	name, source, status string
	note                 string // why it is stale or invalid, as in notes
}

// collectListing reads the project's instances in one request and
// matches the templates against them. set may be nil when the
// definitions could not be read: then only instances are listed.
func collectListing(ctx context.Context, client *incus.Client, set *template.Set) (*listing, error) {
	entries, err := (&instance.Manager{Client: client}).List(ctx)
	if err != nil {
		return nil, err
	}
	l := &listing{}
	bases := map[string]*incus.Instance{}
	for _, e := range entries {
		switch e.Stamps.Type {
		case instance.TypeBase:
			bases[e.Name] = e.Instance
		case instance.TypeInstance:
			l.instances = append(l.instances, e)
		}
	}
	if set != nil {
		for _, d := range set.Definitions() {
			row, note := templateStatusRow(set, d, bases[d.Name])
			row.note = note
			l.templates = append(l.templates, row)
			if note != "" {
				l.notes = append(l.notes, note)
			}
			delete(bases, d.Name)
		}
	}
	for _, e := range entries {
		if _, left := bases[e.Name]; left {
			l.templates = append(l.templates, templateRow{name: e.Name, source: orDash(e.Stamps.Source), status: "built, no definition"})
		}
	}
	return l, nil
}

func templateStatusRow(set *template.Set, d *template.Definition, inst *incus.Instance) (templateRow, string) {
	row := templateRow{name: d.Name, source: string(d.Source.Kind)}
	status, err := build.StatusOf(inst, set, d.Name)
	switch {
	case err != nil:
		row.status = "invalid"
		return row, fmt.Sprintf("%s: %v", d.Name, err)
	case !status.Built:
		row.status = "not built"
	case status.Stale:
		row.status = "stale"
		return row, fmt.Sprintf("%s is stale: %s", d.Name, status.Reason)
	default:
		row.status = "built"
	}
	return row, ""
}

func (l *listing) write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	if len(l.templates) > 0 {
		fmt.Fprintln(tw, "TEMPLATE\tSOURCE\tSTATUS")
		for _, t := range l.templates {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", t.name, t.source, t.status)
		}
		fmt.Fprintln(tw)
	}
	mcp := false
	for _, e := range l.instances {
		mcp = mcp || e.Stamps.MCP.Any()
	}
	if len(l.instances) == 0 {
		fmt.Fprintln(tw, "No instances; make one with `isx branch NAME --from TEMPLATE`.")
	} else {
		header := "NAME\tTEMPLATE\tSTATE"
		if mcp {
			header += "\tMCP"
		}
		fmt.Fprintln(tw, header)
		for _, e := range l.instances {
			line := fmt.Sprintf("%s\t%s\t%s", e.Name, orDash(e.Stamps.Template), strings.ToLower(e.Status))
			if mcp {
				line += "\t" + orDash(e.Stamps.MCP.Label())
			}
			fmt.Fprintln(tw, line)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(l.notes) > 0 {
		_, err := fmt.Fprintf(w, "\n%s\n", strings.Join(l.notes, "\n"))
		return err
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
