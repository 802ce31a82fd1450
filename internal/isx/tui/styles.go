package tui

import "github.com/charmbracelet/lipgloss"

// styles are the looks of the screen, from one renderer so that NO_COLOR
// (and a terminal without colours) turns every colour off. Nothing relies
// on colour alone: the selected row also has a marker, states are words.
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
}

func newStyles(r *lipgloss.Renderer) styles {
	return styles{
		title:    r.NewStyle().Bold(true).Foreground(lipgloss.Color("15")).Background(lipgloss.Color("4")),
		header:   r.NewStyle().Bold(true).Underline(true),
		selected: r.NewStyle().Reverse(true),
		dim:      r.NewStyle().Foreground(lipgloss.Color("8")),
		good:     r.NewStyle().Foreground(lipgloss.Color("2")),
		warn:     r.NewStyle().Foreground(lipgloss.Color("3")),
		bad:      r.NewStyle().Foreground(lipgloss.Color("1")).Bold(true),
		banner:   r.NewStyle().Bold(true).Foreground(lipgloss.Color("15")).Background(lipgloss.Color("1")),
		key:      r.NewStyle().Bold(true).Foreground(lipgloss.Color("6")),
		label:    r.NewStyle().Bold(true),
	}
}

// marker starts the selected row; space starts the others.
const (
	marker   = "> "
	unmarked = "  "
)
