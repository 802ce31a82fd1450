package tui

import "charm.land/bubbles/v2/key"

// keyMap holds every key the TUI answers. Each view shows in its footer the
// ones that work there; F1 (or ?) shows them all.
type keyMap struct {
	Up, Down, PageUp, PageDown, Top, Bottom key.Binding

	Pane, Details, Mission, Help, Filter, Back, Quit key.Binding

	Branch, Build, Shell, Start, Stop, Destroy key.Binding

	Join, Copy key.Binding

	Yes, No, Network, Submit key.Binding
}

func newKeyMap() keyMap {
	return keyMap{
		Up:       key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
		Down:     key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
		PageUp:   key.NewBinding(key.WithKeys("pgup"), key.WithHelp("pgup", "page up")),
		PageDown: key.NewBinding(key.WithKeys("pgdown"), key.WithHelp("pgdn", "page down")),
		Top:      key.NewBinding(key.WithKeys("home", "g"), key.WithHelp("home/g", "first")),
		Bottom:   key.NewBinding(key.WithKeys("end", "G"), key.WithHelp("end/G", "last")),

		Pane:    key.NewBinding(key.WithKeys("tab", "shift+tab"), key.WithHelp("tab", "other list")),
		Details: key.NewBinding(key.WithKeys("f3"), key.WithHelp("F3", "details")),
		Mission: key.NewBinding(key.WithKeys("f4"), key.WithHelp("F4", "mission control")),
		Help:    key.NewBinding(key.WithKeys("f1", "?"), key.WithHelp("F1", "help")),
		Filter:  key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter")),
		Back:    key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back")),
		Quit:    key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit")),

		Branch:  key.NewBinding(key.WithKeys("b"), key.WithHelp("b", "branch")),
		Build:   key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "build")),
		Shell:   key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "shell")),
		Start:   key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "start")),
		Stop:    key.NewBinding(key.WithKeys("x"), key.WithHelp("x", "stop")),
		Destroy: key.NewBinding(key.WithKeys("d"), key.WithHelp("d", "destroy")),

		Join: key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "join task")),
		Copy: key.NewBinding(key.WithKeys("c"), key.WithHelp("c", "copy join")),

		Yes:     key.NewBinding(key.WithKeys("y"), key.WithHelp("y", "destroy")),
		No:      key.NewBinding(key.WithKeys("n", "esc"), key.WithHelp("n", "keep")),
		Network: key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "network")),
		Submit:  key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "branch")),
	}
}

// Footers, per view and list.
func (k keyMap) templateKeys() []key.Binding {
	return []key.Binding{k.Branch, k.Build, k.Details, k.Pane, k.Filter, k.Mission, k.Help, k.Quit}
}

func (k keyMap) instanceKeys() []key.Binding {
	return []key.Binding{k.Shell, k.Start, k.Stop, k.Destroy, k.Details, k.Pane, k.Filter, k.Mission, k.Help, k.Quit}
}

func (k keyMap) detailsKeys() []key.Binding {
	return []key.Binding{k.Back, k.Up, k.Down, k.Shell, k.Start, k.Stop, k.Destroy, k.Mission, k.Quit}
}

// templateDetailsKeys are a template's: it is branched and built, not
// started or entered.
func (k keyMap) templateDetailsKeys() []key.Binding {
	return []key.Binding{k.Back, k.Up, k.Down, k.Branch, k.Build, k.Mission, k.Quit}
}

func (k keyMap) missionKeys() []key.Binding {
	return []key.Binding{k.Join, k.Copy, k.Details, k.Back, k.Help, k.Quit}
}

// fullHelp is the help view's columns.
func (k keyMap) fullHelp() [][]key.Binding {
	return [][]key.Binding{
		{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom, k.Pane},
		{k.Branch, k.Build, k.Shell, k.Start, k.Stop, k.Destroy, k.Filter},
		{k.Details, k.Mission, k.Join, k.Copy, k.Help, k.Back, k.Quit},
	}
}
