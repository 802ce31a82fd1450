package tui

import (
	"fmt"
	"slices"
	"strings"

	"charm.land/lipgloss/v2"

	"github.com/incusspawn/isx/internal/isx/instance"
)

// The lists' columns. The instance list has no MCP column (seed 001:
// details show the MCP state instead).
var (
	templateColumns = []column{{title: "TEMPLATE", min: 12}, {title: "SOURCE"}, {title: "STATUS"}, {title: "TOOLS", min: 5}}
	instanceColumns = []column{{title: "NAME", min: 10}, {title: "TEMPLATE", min: 8}, {title: "STATE"}, {title: "NETWORK"}, {title: "AGE"}}
)

// listGap is the space between columns.
const listGap = 2

// listsBody is the templates over the instances, as `isx list` prints
// them; the list with the cursor is the one keys act on.
func (m *model) listsBody(height int) []string {
	if m.listing == nil {
		what := "Reading the templates and instances…"
		if m.listErr != nil {
			what = "Nothing read yet."
		}
		return []string{"", " " + what}
	}
	templates := m.visibleTemplates()
	rows := max(len(templates), 1)
	templateHeight := 1 + min(rows, max(height/3-1, 1))
	instanceHeight := max(height-templateHeight-1, 2)
	lines := m.templatePane(templates, templateHeight)
	lines = append(lines, "")
	return append(lines, m.instancePane(m.visibleInstances(), instanceHeight)...)
}

func (m *model) templatePane(templates []Template, height int) []string {
	rows := make([][]string, len(templates))
	for i, t := range templates {
		status := t.Status
		if busy, ok := m.busy[t.Name]; ok {
			status = busy + "…"
		}
		rows[i] = []string{t.Name, t.Source, status, orDash(strings.Join(t.Tools, ","))}
	}
	empty := "No template definitions found; built-in, ~/.config/incus-spawn/images/ and template-paths are read."
	if m.filter.Value() != "" {
		empty = "No template matches the filter."
	}
	return m.table(tableSpec{
		cols: templateColumns, rows: rows, names: templateNames(templates),
		sel: &m.sel[paneTemplates], focused: m.pane == paneTemplates, height: height, empty: empty,
		tint: func(row, col int) (lipgloss.Style, bool) {
			if col != 2 {
				return lipgloss.Style{}, false
			}
			return m.statusStyle(rows[row][2]), true
		},
	})
}

func (m *model) instancePane(entries []*instance.Entry, height int) []string {
	now := m.clock().Now()
	rows := make([][]string, len(entries))
	for i, e := range entries {
		state := strings.ToLower(e.Status)
		if busy, ok := m.busy[e.Name]; ok {
			state = busy + "…"
		}
		network := string(e.Stamps.Network)
		rows[i] = []string{e.Name, orDash(e.Stamps.Template), state, orDash(network), since(e.Stamps.Created, now)}
	}
	empty := "No instances; select a template and press b to branch one."
	if m.filter.Value() != "" {
		empty = "No instance matches the filter."
	}
	return m.table(tableSpec{
		cols: instanceColumns, rows: rows, names: entryNames(entries),
		sel: &m.sel[paneInstances], focused: m.pane == paneInstances, height: height, empty: empty,
		tint: func(row, col int) (lipgloss.Style, bool) {
			if col != 2 {
				return lipgloss.Style{}, false
			}
			return m.stateStyle(rows[row][2]), true
		},
	})
}

func (m *model) statusStyle(status string) lipgloss.Style {
	switch {
	case status == "built":
		return m.st.good
	case status == "not built":
		return m.st.dim
	case status == "invalid":
		return m.st.bad
	}
	return m.st.warn
}

func (m *model) stateStyle(state string) lipgloss.Style {
	switch state {
	case "running":
		return m.st.good
	case "stopped":
		return m.st.dim
	}
	return m.st.warn
}

// tableSpec is one list to draw.
type tableSpec struct {
	cols    []column
	rows    [][]string
	names   []string   // each row's name, for the selection
	sel     *selection // nil: no cursor
	focused bool
	height  int // lines, the header's included
	empty   string
	// tint gives a cell its style (rows without the cursor only).
	tint func(row, col int) (lipgloss.Style, bool)
}

// table draws a list with its header, scrolled so that the selected row
// shows; the cursor's row is marked (and reversed) while the list has the
// keys.
func (m *model) table(t tableSpec) []string {
	widths := layout(t.cols, t.rows, m.width-len(marker), listGap)
	titles := make([]string, len(t.cols))
	for i, c := range t.cols {
		titles[i] = c.title
	}
	visible := max(t.height-1, 1)
	header := m.st.header.Render(unmarked + cells(titles, widths, listGap))
	if len(t.rows) == 0 {
		return []string{header, m.st.dim.Render(unmarked + t.empty)}
	}
	current := -1
	if t.sel != nil {
		current = slices.Index(t.names, t.sel.name)
		if current < 0 {
			current = min(max(t.sel.index, 0), len(t.rows)-1)
		}
		t.sel.offset = scroll(t.sel.offset, current, visible, len(t.rows))
	}
	offset := 0
	if t.sel != nil {
		offset = t.sel.offset
	}
	if len(t.rows) > visible {
		header += m.st.dim.Render(fmt.Sprintf("  %d–%d of %d", offset+1, min(offset+visible, len(t.rows)), len(t.rows)))
	}
	lines := []string{header}
	for i := offset; i < len(t.rows) && i < offset+visible; i++ {
		if i == current && t.focused {
			line := fit(marker+cells(t.rows[i], widths, listGap), m.width)
			lines = append(lines, m.st.selected.Render(line))
			continue
		}
		lines = append(lines, unmarked+m.tinted(t, i, widths))
	}
	return lines
}

// tinted is a row's cells with their styles.
func (m *model) tinted(t tableSpec, row int, widths []int) string {
	var b strings.Builder
	for col, w := range widths {
		cell := ""
		if col < len(t.rows[row]) {
			cell = t.rows[row][col]
		}
		if col > 0 {
			b.WriteString(strings.Repeat(" ", listGap))
		}
		text := fit(cell, w)
		if col == len(widths)-1 {
			text = strings.TrimRight(text, " ")
		}
		if t.tint != nil {
			if style, ok := t.tint(row, col); ok {
				text = style.Render(text)
			}
		}
		b.WriteString(text)
	}
	return strings.TrimRight(b.String(), " ")
}

// scroll is the first row to show so that current shows among visible
// rows, moving the window as little as it can.
func scroll(offset, current, visible, rows int) int {
	if current < offset {
		offset = current
	}
	if current >= offset+visible {
		offset = current - visible + 1
	}
	return min(max(offset, 0), max(rows-visible, 0))
}

func networkNames() []string {
	names := make([]string, len(instance.Networks))
	for i, n := range instance.Networks {
		names[i] = string(n)
	}
	return names
}
