package tui

import (
	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/textinput"
	"charm.land/lipgloss/v2"
)

// styles are the looks of the screen. Bubble Tea brings their colours down
// to what the terminal can show, and to none under NO_COLOR. Nothing
// relies on colour alone: the selected row also has a marker, states are
// words.
type styles struct {
	title    lipgloss.Style
	header   lipgloss.Style
	selected lipgloss.Style
	dim      lipgloss.Style
	good     lipgloss.Style
	warn     lipgloss.Style
	bad      lipgloss.Style
	banner   lipgloss.Style
	key      lipgloss.Style
	label    lipgloss.Style
	plain    lipgloss.Style
}

func newStyles() styles {
	return styles{
		title:    lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("15")).Background(lipgloss.Color("4")),
		header:   lipgloss.NewStyle().Bold(true).Underline(true),
		selected: lipgloss.NewStyle().Reverse(true),
		dim:      lipgloss.NewStyle().Foreground(lipgloss.Color("8")),
		good:     lipgloss.NewStyle().Foreground(lipgloss.Color("2")),
		warn:     lipgloss.NewStyle().Foreground(lipgloss.Color("3")),
		bad:      lipgloss.NewStyle().Foreground(lipgloss.Color("1")).Bold(true),
		banner:   lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("15")).Background(lipgloss.Color("1")),
		key:      lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("6")),
		label:    lipgloss.NewStyle().Bold(true),
		plain:    lipgloss.NewStyle(),
	}
}

// helpModel and textInput are the Bubbles parts in these styles.
func (s styles) helpModel() help.Model {
	h := help.New()
	h.Styles = help.Styles{
		Ellipsis: s.dim, ShortKey: s.key, ShortDesc: s.plain, ShortSeparator: s.dim,
		FullKey: s.key, FullDesc: s.plain, FullSeparator: s.dim,
	}
	return h
}

// textInput is a one-line input whose cursor does not blink: a blinking
// cursor redraws the screen twice a second for nothing.
func (s styles) textInput(prompt string) textinput.Model {
	in := textinput.New()
	in.Prompt = prompt
	state := textinput.StyleState{Text: s.plain, Placeholder: s.dim, Suggestion: s.dim, Prompt: s.plain}
	styles := in.Styles()
	styles.Focused, styles.Blurred = state, state
	styles.Cursor.Blink = false
	in.SetStyles(styles)
	return in
}

// marker starts the selected row; space starts the others.
const (
	marker   = "> "
	unmarked = "  "
)
