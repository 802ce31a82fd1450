package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/build"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/template"
)

// Output formats of isx list.
const (
	formatTable = "table"
	formatWide  = "wide"
	formatJSON  = "json"
)

func newListCommand(a *app) *cobra.Command {
	var (
		format string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list [-o wide|json] [--json]",
		Short: "List templates and instances",
		Long: "list shows the templates (built, stale or not built) and the instances isx made,\n" +
			"with their template and state. An MCP column appears while any instance has\n" +
			"isx mcp stamps: held: <purpose>, orphaned, or kept: <purpose>. -o wide adds each\n" +
			"instance's network mode, address and age; --json (or -o json) prints everything\n" +
			"for programs. The tables go to stdout; why a template is stale, and what to do\n" +
			"next, go to stderr.",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case asJSON && format != formatTable && format != formatJSON:
				return usagef("--json and -o %s ask for two formats; give one", format)
			case asJSON:
				format = formatJSON
			case !slices.Contains([]string{formatTable, formatWide, formatJSON}, format):
				return usagef("-o %q is not a format isx list knows; use wide or json", format)
			}
			return a.runList(cmd.Context(), format)
		},
	}
	cmd.Flags().StringVarP(&format, "output", "o", formatTable, "output format: table, wide or json")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON (the same as -o json)")
	if err := cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{formatTable, formatWide, formatJSON}, noFiles)); err != nil {
		panic(err) // the flag was just defined
	}
	return cmd
}

func (a *app) runList(ctx context.Context, format string) error {
	ws, err := a.open()
	if err != nil {
		return err
	}
	switch err := a.checkProject(ctx, ws.client); {
	case coded.CodeOf(err) == codeNoProject:
		a.warnf("%v, so there is nothing in it to list; %s", err, coded.HintOf(err))
	case err != nil:
		return err
	}
	listing, err := collect(ctx, ws.client, a.templatesOrWarn(), format != formatTable)
	if err != nil {
		return err
	}
	a.warnMCPFile(ws.home)
	if format == formatJSON {
		return writeJSON(a.stdout, listing.json(ws.client.ProjectName()))
	}
	if err := listing.write(a.stdout, format == formatWide, a.clock.Now()); err != nil {
		return err
	}
	for _, note := range listing.notes {
		fmt.Fprintf(a.stderr, "hint: %s\n", note)
	}
	if len(listing.instances) == 0 {
		fmt.Fprintln(a.stderr, "hint: no instances yet; make one with `isx branch NAME --from TEMPLATE`")
	}
	return nil
}

// warnMCPFile says when isx mcp cannot use mcp.yaml, since it then
// refuses every call and nothing else would tell the person.
func (a *app) warnMCPFile(home string) {
	report, err := config.MCPStatus(home)
	switch {
	case err != nil:
		a.warnf("isx mcp refuses every call until this is fixed: %v", err)
	case report.Decision == config.DecisionRefuse:
		a.warnf("%s", report.Message())
	case report.MCPExists:
		if _, err := config.LoadMCP(home); err != nil {
			a.warnf("isx mcp refuses every call until mcp.yaml is fixed: %v", err)
		}
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
	return collect(ctx, client, set, false)
}

// collect is collectListing, with the instances' live state (addresses)
// when withState says so.
func collect(ctx context.Context, client *incus.Client, set *template.Set, withState bool) (*listing, error) {
	manager := &instance.Manager{Client: client}
	list := manager.List
	if withState {
		list = manager.ListWithState
	}
	entries, err := list(ctx)
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
		for _, b := range set.Broken() {
			if b.Name != "" && !slices.ContainsFunc(l.templates, func(r templateRow) bool { return r.name == b.Name }) {
				l.templates = append(l.templates, templateRow{name: b.Name, source: string(b.Kind), status: "invalid"})
				delete(bases, b.Name)
			}
		}
		slices.SortFunc(l.templates, func(x, y templateRow) int { return strings.Compare(x.name, y.name) })
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

// write prints the tables; wide adds each instance's network, address and
// age at now.
func (l *listing) write(w io.Writer, wide bool, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	if len(l.templates) > 0 {
		fmt.Fprintln(tw, "TEMPLATE\tSOURCE\tSTATUS")
		for _, t := range l.templates {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", t.name, t.source, t.status)
		}
	}
	if len(l.instances) > 0 {
		if len(l.templates) > 0 {
			fmt.Fprintln(tw)
		}
		l.writeInstances(tw, wide, now)
	}
	return tw.Flush()
}

func (l *listing) writeInstances(tw io.Writer, wide bool, now time.Time) {
	mcp := slices.ContainsFunc(l.instances, func(e instance.Entry) bool { return e.Stamps.MCP.Any() })
	header := []string{"NAME", "TEMPLATE", "STATE"}
	if wide {
		header = append(header, "NETWORK", "ADDRESS", "AGE")
	}
	if mcp {
		header = append(header, "MCP")
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, e := range l.instances {
		cells := []string{e.Name, orDash(e.Stamps.Template), strings.ToLower(e.Status)}
		if wide {
			cells = append(cells, orDash(string(e.Stamps.Network)), orDash(strings.Join(addresses(e.Instance), ", ")), age(created(e), now))
		}
		if mcp {
			cells = append(cells, orDash(e.Stamps.MCP.Label()))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
}

// listJSON is `isx list --json`.
type listJSON struct {
	Project   string         `json:"project"`
	Templates []templateJSON `json:"templates"`
	Instances []instanceJSON `json:"instances"`
}

type templateJSON struct {
	Name   string `json:"name"`
	Source string `json:"source"`
	// Status is the word of the table: built, stale, not built, invalid,
	// or built, no definition.
	Status string `json:"status"`
}

type instanceJSON struct {
	Name      string    `json:"name"`
	Template  string    `json:"template"`
	State     string    `json:"state"`
	Network   string    `json:"network"`
	Addresses []string  `json:"addresses"`
	Owner     string    `json:"owner"`
	Created   time.Time `json:"created,omitzero"`
	MCP       *mcpJSON  `json:"mcp,omitempty"`
}

// mcpJSON is an instance's isx mcp state: held, orphaned or kept.
type mcpJSON struct {
	State   string `json:"state"`
	Purpose string `json:"purpose,omitempty"`
}

func (l *listing) json(project string) listJSON {
	out := listJSON{Project: project, Templates: []templateJSON{}, Instances: []instanceJSON{}}
	for _, t := range l.templates {
		out.Templates = append(out.Templates, templateJSON{Name: t.name, Source: t.source, Status: t.status})
	}
	for _, e := range l.instances {
		inst := instanceJSON{Name: e.Name, Template: e.Stamps.Template, State: strings.ToLower(e.Status), Network: string(e.Stamps.Network),
			Addresses: addresses(e.Instance), Owner: e.Stamps.Owner, Created: created(e).UTC()}
		if inst.Addresses == nil {
			inst.Addresses = []string{}
		}
		if state := e.Stamps.MCP.Holding(); state != "" {
			inst.MCP = &mcpJSON{State: state, Purpose: e.Stamps.MCP.Purpose}
		}
		out.Instances = append(out.Instances, inst)
	}
	return out
}

// addresses are the instance's global addresses, IPv4 first, from its
// live state (none when it is stopped or was listed without state).
func addresses(inst *incus.Instance) []string {
	if inst == nil || inst.State == nil {
		return nil
	}
	var out []netip.Addr
	for name, nic := range inst.State.Network {
		if name == "lo" {
			continue
		}
		for _, address := range nic.Addresses {
			if ip, err := netip.ParseAddr(address.Address); err == nil && address.Scope == "global" {
				out = append(out, ip)
			}
		}
	}
	slices.SortFunc(out, func(x, y netip.Addr) int {
		if x.Is4() != y.Is4() {
			if x.Is4() {
				return -1
			}
			return 1
		}
		return x.Compare(y)
	})
	texts := make([]string, len(out))
	for i, ip := range out {
		texts[i] = ip.String()
	}
	return texts
}

// created is when isx made the instance, or Incus's creation time for one
// without the stamp.
func created(e instance.Entry) time.Time {
	if !e.Stamps.Created.IsZero() {
		return e.Stamps.Created
	}
	if e.Instance != nil {
		return e.Instance.CreatedAt
	}
	return time.Time{}
}

// age is how long ago t was, as kubectl shows it: 42s, 5m, 7h, 3d.
func age(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return instance.Age(now.Sub(t))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
