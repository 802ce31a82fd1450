package tui

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/task"
)

// missionRow is one line of mission control: a task, or an MCP instance
// with no task to show.
type missionRow struct {
	entry *instance.Entry
	task  *task.Info
	note  string // the state cell of a row without a task
}

func (r missionRow) key() string {
	if r.task != nil {
		return r.entry.Name + "/" + r.task.ID
	}
	return r.entry.Name
}

// Mission control's columns; the activity ones only while there is a
// proxy to count (until then a line says there is none).
var (
	missionColumns = []column{
		{title: "INSTANCE", min: 10}, {title: "HOLD"}, {title: "TASK"}, {title: "STATE", min: 7},
		{title: "AGENT", min: 5}, {title: "MODEL", min: 5},
	}
	activityColumns = []column{{title: "TOKENS"}, {title: "IN FLIGHT"}, {title: "IDLE"}}
	spendColumn     = column{title: "PER MINUTE"}
)

// spendWidth is the narrowest terminal whose mission control has room
// for every row's sparkline; a narrower one shows the selected row's
// below the table.
const spendWidth = 100

func (m *model) missionColumns() []column {
	if m.opts.Activities == nil {
		return missionColumns
	}
	cols := append(slices.Clone(missionColumns), activityColumns...)
	if m.width >= spendWidth {
		cols = slices.Insert(cols, len(missionColumns)+1, spendColumn)
	}
	return cols
}

// spendLine is the instance's tokens per minute as a sparkline, "-" when
// the proxy has not counted it.
func (m *model) spendLine(name string, now time.Time) string {
	if m.activity == nil {
		return "-"
	}
	if _, ok := m.activity.counts[name]; !ok {
		return "-"
	}
	return orDash(Sparkline(m.activity.spend(name, now)))
}

// missionRows are the MCP instances of this host user, whichever session
// holds them, each with its tasks.
func (m *model) missionRows() []missionRow {
	var rows []missionRow
	for _, e := range m.mcpInstances() {
		if m.opts.Owner != "" && e.Stamps.MCP.Owner != m.opts.Owner {
			continue
		}
		tv := m.tasks[e.Name]
		switch {
		case !e.Instance.Running():
			rows = append(rows, missionRow{entry: e, note: strings.ToLower(e.Status)})
			continue
		case tv == nil || !tv.read:
			rows = append(rows, missionRow{entry: e, note: "reading…"})
			continue
		case len(tv.infos) == 0:
			rows = append(rows, missionRow{entry: e, note: "no tasks"})
			continue
		}
		infos := slices.Clone(tv.infos)
		slices.SortStableFunc(infos, func(a, b task.Info) int { return a.Started.Compare(b.Started) })
		for i := range infos {
			rows = append(rows, missionRow{entry: e, task: &infos[i]})
		}
	}
	return rows
}

func (m *model) missionKeys() []string {
	rows := m.missionRows()
	keys := make([]string, len(rows))
	for i, r := range rows {
		keys[i] = r.key()
	}
	return keys
}

// selectedMission is the row under the cursor, if any.
func (m *model) selectedMission() (missionRow, bool) {
	rows := m.missionRows()
	for _, r := range rows {
		if r.key() == m.mission.name {
			return r, true
		}
	}
	if len(rows) > 0 {
		return rows[min(max(m.mission.index, 0), len(rows)-1)], true
	}
	return missionRow{}, false
}

// stuck says whether a running task's instance has gone StuckAfter or
// longer without a model call.
func (m *model) stuck(r missionRow, now time.Time) bool {
	if r.task == nil || r.task.State != task.StateRunning {
		return false
	}
	idle, ok := m.activity.idle(r.entry.Name, now)
	return ok && idle >= StuckAfter
}

func (m *model) missionBody(height int) []string {
	now := m.clock().Now()
	rows := m.missionRows()
	cellsOf := make([][]string, len(rows))
	for i, r := range rows {
		cellsOf[i] = m.missionCells(r, now)
	}
	note := ""
	switch {
	case m.opts.Activities == nil:
		note = "Activity: no proxy. Tokens, requests in flight and idle times appear once the host proxy runs."
	case m.activityErr != nil:
		note = "Activity: the proxy does not answer: " + m.activityErr.Error()
	default:
		note = fmt.Sprintf("Activity from the host proxy; a running task idle for %s or more is marked stuck?.", age(StuckAfter))
	}
	// What mission control is, for whoever comes here first.
	note = "Every instance and task agents made through isx mcp, across their sessions; enter joins a task, c copies the command that joins it. " + note
	var lines []string
	for _, line := range wrap(note, m.width-2) {
		lines = append(lines, " "+m.st.dim.Render(line))
	}
	lines = append(lines, "")
	table := m.table(tableSpec{
		cols: m.missionColumns(), rows: cellsOf, names: m.missionKeys(),
		sel: &m.mission, focused: true, height: max(height-len(lines), 2),
		empty: "No MCP instances of yours; an agent makes them through isx mcp.",
		tint: func(row, col int) (lipgloss.Style, bool) {
			switch {
			case m.stuck(rows[row], now):
				return m.st.warn, true
			case col == 3 && rows[row].task != nil:
				return m.stateStyle(string(rows[row].task.State)), true
			}
			return lipgloss.Style{}, false
		},
	})
	return append(lines, table...)
}

func (m *model) missionCells(r missionRow, now time.Time) []string {
	hold, _, _ := strings.Cut(r.entry.Stamps.MCP.Label(), ":")
	cellsOf := []string{r.entry.Name, orDash(hold), "-", r.note, "-", "-"}
	if r.task != nil {
		cellsOf = []string{r.entry.Name, orDash(hold), r.task.ID, taskState(*r.task), agentOf(*r.task), modelOf(*r.task)}
	}
	if m.opts.Activities == nil {
		return cellsOf
	}
	tokens, flight, idle := "-", "-", "-"
	if m.activity != nil {
		if a, ok := m.activity.counts[r.entry.Name]; ok {
			tokens, flight = count(a.Tokens()), fmt.Sprint(a.RequestsInFlight)
		}
		if d, ok := m.activity.idle(r.entry.Name, now); ok {
			idle = age(d)
			if m.stuck(r, now) {
				idle += " stuck?"
			}
		}
	}
	cellsOf = append(cellsOf, tokens, flight, idle)
	if m.width >= spendWidth {
		cellsOf = slices.Insert(cellsOf, len(missionColumns)+1, m.spendLine(r.entry.Name, now))
	}
	return cellsOf
}

// missionStatus is the selected row's purpose and holder, and the command
// that joins its task.
func (m *model) missionStatus() []string {
	if m.message != "" {
		return m.statusLines()
	}
	r, ok := m.selectedMission()
	if !ok {
		return []string{""}
	}
	mcp := r.entry.Stamps.MCP
	holder := "holder: " + m.holder(mcp)
	if m.opts.Activities != nil && m.width < spendWidth {
		holder += " · tokens per minute: " + m.spendLine(r.entry.Name, m.clock().Now())
	}
	return []string{
		r.entry.Name + " · purpose: " + orDash(mcp.Purpose),
		holder,
		"join: " + m.joinCommand(r),
	}
}

// joinCommand is the command that joins the row's task (task_status's
// join_command), or opens a shell in its instance.
func (m *model) joinCommand(r missionRow) string {
	if r.task != nil {
		return task.JoinCommand(r.task.ID, r.entry.Name)
	}
	return "isx shell " + r.entry.Name
}

func (m *model) missionKey(msg tea.KeyPressMsg) tea.Cmd {
	if m.moveKey(msg, &m.mission, m.missionKeys(), m.height/2) {
		m.message = ""
		return nil
	}
	r, selected := m.selectedMission()
	switch {
	case key.Matches(msg, m.keys.Quit):
		return tea.Quit
	case key.Matches(msg, m.keys.Back, m.keys.Mission):
		m.switchTo(viewLists)
	case key.Matches(msg, m.keys.Help):
		m.showHelp()
	case !selected:
	case key.Matches(msg, m.keys.Details):
		m.openDetails(r.entry.Name, false)
	case key.Matches(msg, m.keys.Join):
		if r.task != nil {
			return m.shell(r.entry.Name, r.task.ID)
		}
		return m.shell(r.entry.Name, "")
	case key.Matches(msg, m.keys.Copy):
		return m.copyText(m.joinCommand(r))
	}
	return nil
}

// copyText puts text on the terminal's clipboard (OSC 52, which tmux and
// most terminals honour).
func (m *model) copyText(text string) tea.Cmd {
	m.say("Copied: "+text, false)
	return tea.SetClipboard(text)
}
