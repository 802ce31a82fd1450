package tui

import (
	"errors"
	"fmt"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/incusspawn/isx/internal/isx/incus"
)

// View is the screen, on the alternate screen of the terminal.
func (m *model) View() tea.View {
	v := tea.NewView(m.render())
	v.AltScreen = true
	return v
}

// render draws the whole screen: a title bar, a banner while Incus is
// away, the view's body, and at the bottom a status line and the keys
// that work.
func (m *model) render() string {
	if m.width <= 0 || m.height <= 0 {
		return ""
	}
	var (
		title  string
		body   func(height int) []string
		status []string
		keys   []key.Binding
	)
	switch m.view {
	case viewDetails:
		title, body, status, keys = "details", m.detailsBody, m.statusLines(), m.keys.detailsKeys()
		if m.detailsTemplate {
			keys = m.keys.templateDetailsKeys()
		}
	case viewMission:
		title, body, status, keys = "mission control", m.missionBody, m.missionStatus(), m.keys.missionKeys()
	case viewHelp:
		title, body, status, keys = "help", m.helpBody, nil, []key.Binding{m.keys.Back}
	default:
		title, body, status = "", m.listsBody, m.statusLines()
		keys = m.keys.instanceKeys()
		if m.pane == paneTemplates {
			keys = m.keys.templateKeys()
		}
	}
	top := append([]string{m.titleBar(title)}, m.banner()...)
	bottom := append(m.buildPanel(), status...)
	bottom = append(bottom, m.footer(keys)...)
	height := max(m.height-len(top)-len(bottom), 0)
	lines := append(top, fill(body(height), height)...)
	lines = append(lines, bottom...)
	if len(lines) > m.height {
		lines = lines[:m.height]
	}
	for i, line := range lines {
		lines[i] = clip(line, m.width)
	}
	return strings.Join(lines, "\n")
}

// fill pads or cuts lines to exactly height.
func fill(lines []string, height int) []string {
	if len(lines) > height {
		return lines[:height]
	}
	for len(lines) < height {
		lines = append(lines, "")
	}
	return lines
}

// titleBar is the top line: where isx works and how much there is.
func (m *model) titleBar(view string) string {
	left := " isx · project " + m.project()
	if view != "" {
		left += " · " + view
	}
	right := ""
	if m.listing != nil {
		right = fmt.Sprintf("%d templates · %d instances ", len(m.listing.Templates), len(m.listing.Instances))
	}
	if v := strings.TrimSpace(m.filter.Value()); v != "" {
		right = "filter “" + v + "” · " + right
	}
	gap := m.width - ansi.StringWidth(left) - ansi.StringWidth(right)
	if gap < 1 {
		return m.st.title.Render(fit(left, m.width))
	}
	return m.st.title.Render(left + strings.Repeat(" ", gap) + right)
}

// banner says, while Incus does not answer, that the screen is out of date
// and how to start Incus; the TUI keeps trying and recovers by itself.
func (m *model) banner() []string {
	var text string
	switch err := m.unavailable(); {
	case err != nil:
		text = "Incus is not answering, so what you see may be out of date. " + sentence(err) + " Retrying…"
	case m.streamErr != nil:
		text = "Lost the Incus event stream (" + m.streamErr.Error() + "); reconnecting…"
	default:
		return nil
	}
	lines := wrap(text, m.width-2)
	for i, line := range lines {
		lines[i] = m.st.banner.Render(fit(" "+line, m.width))
	}
	return lines
}

// sentence is err's message as a sentence.
func sentence(err error) string {
	text := strings.TrimPrefix(err.Error(), "incus: ")
	if text == "" {
		return ""
	}
	text = strings.ToUpper(text[:1]) + text[1:]
	if !strings.HasSuffix(text, ".") {
		text += "."
	}
	return text
}

// statusLines is the line above the keys: a prompt, the filter being
// typed, the outcome of the last action, or a note on the selection.
func (m *model) statusLines() []string {
	switch {
	case m.prompt != nil:
		return m.promptLines()
	case m.confirm != nil:
		text := fmt.Sprintf("Destroy %s? %s Press y to destroy it, any other key to keep it.", m.confirm.name, m.confirm.warning)
		return m.styled(wrap(strings.Join(strings.Fields(text), " "), m.width), m.st.warn)
	case m.filtering:
		return []string{m.filter.View()}
	case m.message != "":
		style := m.st.good
		if m.messageBad {
			style = m.st.bad
		}
		return m.styled(wrap(m.message, m.width), style)
	case m.listErr != nil && !errors.Is(m.listErr, incus.ErrUnavailable):
		return m.styled(wrap(m.listErr.Error(), m.width), m.st.bad)
	case m.view == viewLists && m.pane == paneTemplates:
		if t := m.template(m.sel[paneTemplates].name); t != nil && t.Note != "" {
			return m.styled(wrap(t.Note, m.width), m.st.warn)
		}
	}
	if m.listing != nil && len(m.listing.Notes) > 0 {
		return m.styled([]string{m.listing.Notes[0]}, m.st.warn)
	}
	return []string{""}
}

func (m *model) styled(lines []string, style lipgloss.Style) []string {
	for i, line := range lines {
		lines[i] = style.Render(line)
	}
	return lines
}

func (m *model) promptLines() []string {
	p := m.prompt
	first := fmt.Sprintf("Branch %s as: %s", p.from, p.name.View())
	var networks []string
	for i, n := range networkNames() {
		if i == p.network {
			networks = append(networks, "["+n+"]")
		} else {
			networks = append(networks, n)
		}
	}
	second := "network: " + strings.Join(networks, " ") + "   tab network · enter branch · esc cancel"
	lines := []string{first, second}
	if p.problem != "" {
		lines = append(lines, m.styled(wrap(p.problem, m.width), m.st.bad)...)
	}
	return lines
}

// buildPanel shows the build under way, or the one that failed, with its
// latest progress lines.
func (m *model) buildPanel() []string {
	if m.view != viewLists || (m.building == "" && !m.buildFailed) {
		return nil
	}
	keep := 3
	if m.height >= 40 {
		keep = 8
	}
	head := "Building " + m.building + ":"
	if m.building == "" {
		head = "The build failed; its last lines (esc hides them):"
	}
	lines := []string{m.st.label.Render(head)}
	shown := m.buildLines[max(len(m.buildLines)-keep, 0):]
	for _, line := range shown {
		lines = append(lines, m.st.dim.Render("  "+strings.TrimSpace(line)))
	}
	return lines
}

// footer lists the keys that work here, as many lines as they need.
func (m *model) footer(keys []key.Binding) []string {
	var lines []string
	line := ""
	for _, k := range keys {
		h := k.Help()
		item := m.st.key.Render(h.Key) + " " + h.Desc
		switch {
		case line == "":
			line = item
		case ansi.StringWidth(line)+2+ansi.StringWidth(item) <= m.width:
			line += "  " + item
		default:
			lines = append(lines, line)
			line = item
		}
	}
	return append(lines, line)
}

func (m *model) helpBody(height int) []string {
	lines := []string{
		"",
		" " + m.st.label.Render("Keys"),
		"",
	}
	for _, line := range strings.Split(m.help.FullHelpView(m.keys.fullHelp()), "\n") {
		lines = append(lines, " "+line)
	}
	lines = append(lines, "")
	for _, paragraph := range []string{
		"The lists show what `isx list` shows. The instance list has no MCP column: F3 shows an instance's MCP state (held, orphaned or kept), its purpose and the session holding it.",
		"Mission control (F4) shows every MCP instance and task of yours across isx mcp sessions; enter joins the selected task, c copies its join command.",
		"Everything updates live from the Incus events stream.",
	} {
		for _, line := range wrap(paragraph, m.width-2) {
			lines = append(lines, " "+line)
		}
		lines = append(lines, "")
	}
	return lines
}
