package tui

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/incusspawn/isx/internal/isx/holding"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/task"
)

// labelWidth is the width of the labels in the details.
const labelWidth = 10

// detailsBody is F3: everything about one instance (or template), in a
// scrolling view.
func (m *model) detailsBody(height int) []string {
	var lines []string
	if m.detailsTemplate {
		lines = m.templateDetails()
	} else {
		lines = m.instanceDetails()
	}
	lines = strings.Split(strings.Join(lines, "\n"), "\n")
	for i, line := range lines {
		lines[i] = clip(line, m.width)
	}
	m.viewport.SetWidth(m.width)
	m.viewport.SetHeight(height)
	m.viewport.SetContent(strings.Join(lines, "\n"))
	return strings.Split(m.viewport.View(), "\n")
}

// field is a labelled value of the details, wrapped under itself.
func (m *model) field(label, value string) string {
	indent := strings.Repeat(" ", labelWidth+2)
	lines := wrap(value, max(m.width-len(indent), 10))
	return " " + m.st.label.Render(fit(label, labelWidth)) + " " + strings.Join(lines, "\n"+indent)
}

func (m *model) instanceDetails() []string {
	e := m.entry(m.details)
	if e == nil {
		if m.listing == nil {
			return []string{"", " Reading " + m.details + "…"}
		}
		return []string{"", " " + m.st.warn.Render(m.details+" no longer exists: it was deleted. esc goes back to the lists.")}
	}
	now := m.clock().Now()
	s := e.Stamps
	source := orDash(s.Template)
	if s.Source != "" {
		source += " (" + s.Source + ")"
	}
	state := strings.ToLower(e.Status)
	if busy, ok := m.busy[e.Name]; ok {
		state += ", " + busy + "…"
	}
	lines := []string{
		" " + m.st.label.Render(e.Name),
		"",
		m.field("State", m.stateStyle(strings.ToLower(e.Status)).Render(state)),
		m.field("Template", source),
		m.field("Network", orDash(string(s.Network))),
		m.field("Owner", orDash(s.Owner)),
		m.field("Created", when(s.Created, now)),
		m.field("In it", m.shellsIn(e.Name)),
		"",
	}
	lines = append(lines, m.mcpDetails(e, now)...)
	lines = append(lines, "", " "+m.st.label.Render("Stamps"))
	for _, k := range slices.Sorted(maps.Keys(e.Instance.Config)) {
		if strings.HasPrefix(k, instance.Prefix) {
			lines = append(lines, "   "+fit(k, 28)+" "+e.Instance.Config[k])
		}
	}
	return lines
}

// shellsIn says who is in the instance with isx shell.
func (m *model) shellsIn(name string) string {
	shells, err := instance.Shells(m.opts.Home, m.opts.Incus.ProjectName(), name)
	switch {
	case err != nil:
		return "unknown: " + err.Error()
	case len(shells) == 0:
		return "nobody, with isx shell"
	}
	pids := make([]string, len(shells))
	for i, sh := range shells {
		pids[i] = fmt.Sprint(sh.PID)
	}
	return fmt.Sprintf("%d isx shell (pid %s)", len(shells), strings.Join(pids, ", "))
}

// mcpDetails is what isx mcp stamped: the state `isx list` shows in its
// MCP column, the purpose, and the session holding the instance (ISX-048),
// then its tasks and activity.
func (m *model) mcpDetails(e *instance.Entry, now time.Time) []string {
	mcp := e.Stamps.MCP
	if !mcp.Any() {
		return []string{m.field("MCP", "- (not an isx mcp instance)")}
	}
	lines := []string{
		m.field("MCP", orDash(mcp.Label())),
		m.field("Purpose", orDash(mcp.Purpose)),
		m.field("Holder", m.holder(mcp)),
	}
	if at, session, ok := mcp.OrphanedAt(); ok {
		lines = append(lines, m.field("Orphaned", when(at, now)+" when "+session+" ended"))
	}
	if mcp.Kept != "" {
		lines = append(lines, m.field("Kept", stampTime(mcp.Kept, now)))
	}
	if mcp.Dormant != "" {
		lines = append(lines, m.field("Dormant", "stopped "+stampTime(mcp.Dormant, now)))
	}
	if mcp.State != "" {
		lines = append(lines, m.field("Under way", mcp.State))
	}
	if mcp.Caller != "" {
		lines = append(lines, m.field("Caller", mcp.Caller))
	}
	lines = append(lines, "")
	lines = append(lines, m.taskDetails(e, now)...)
	return append(lines, "", m.field("Activity", m.activityOf(e.Name, now)))
}

// holder is the session holding an instance and whether it still runs.
func (m *model) holder(mcp instance.MCPStamps) string {
	if mcp.Session == "" {
		return "- (no session holds it)"
	}
	if holding.SessionAlive(mcp.Session) {
		return mcp.Session + " " + m.st.good.Render("(alive)")
	}
	return mcp.Session + " " + m.st.warn.Render("(ended)")
}

func stampTime(value string, now time.Time) string {
	t, err := time.Parse(time.RFC3339, value)
	if err != nil {
		return value
	}
	return when(t, now)
}

// taskDetails lists the instance's tasks with their states.
func (m *model) taskDetails(e *instance.Entry, now time.Time) []string {
	tv := m.tasks[e.Name]
	switch {
	case !e.Instance.Running():
		return []string{m.field("Tasks", "not read: the instance is "+strings.ToLower(e.Status)+" (its task records are read while it runs)")}
	case tv == nil || !tv.read:
		return []string{m.field("Tasks", "reading…")}
	case tv.err != nil && len(tv.infos) == 0:
		return []string{m.field("Tasks", m.st.bad.Render(firstLine(tv.err.Error())))}
	case len(tv.infos) == 0:
		return []string{m.field("Tasks", "none")}
	}
	lines := []string{m.field("Tasks", summary(tv.infos))}
	rows := make([][]string, len(tv.infos))
	for i, info := range tv.infos {
		rows[i] = []string{info.ID, agentOf(info), taskState(info), since(info.Started, now), modelOf(info), commandOf(info)}
	}
	cols := []column{{title: "TASK"}, {title: "AGENT"}, {title: "STATE"}, {title: "STARTED"}, {title: "MODEL"}, {title: "COMMAND", min: 7}}
	widths := layout(cols, rows, m.width-3, listGap)
	titles := make([]string, len(cols))
	for i, c := range cols {
		titles[i] = c.title
	}
	lines = append(lines, "   "+m.st.header.Render(cells(titles, widths, listGap)))
	for _, row := range rows {
		lines = append(lines, "   "+cells(row, widths, listGap))
	}
	return lines
}

// summary counts tasks by state: "1 running, 2 finished".
func summary(infos []task.Info) string {
	counts := map[task.State]int{}
	for _, info := range infos {
		counts[info.State]++
	}
	var parts []string
	for _, state := range []task.State{task.StateRunning, task.StateAttached, task.StateFinished, task.StateLost} {
		if counts[state] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[state], state))
		}
	}
	return strings.Join(parts, ", ")
}

// activityOf is the proxy's counts of an instance, in one line.
func (m *model) activityOf(name string, now time.Time) string {
	switch {
	case m.opts.Activities == nil:
		return "no proxy: token and request counts appear here once the host proxy runs"
	case m.activityErr != nil:
		return m.st.bad.Render("the proxy does not answer: " + m.activityErr.Error())
	case m.activity == nil:
		return "waiting for the proxy…"
	}
	a, ok := m.activity.counts[name]
	if !ok {
		return "the proxy has not counted this instance yet"
	}
	text := fmt.Sprintf("%s tokens (in %s, out %s, cache read %s, cache write %s) since %s; %d requests, %d in flight",
		count(a.Tokens()), count(a.InputTokens), count(a.OutputTokens), count(a.CacheReadInputTokens), count(a.CacheCreationInputTokens),
		when(a.CountingSince, now), a.Requests, a.RequestsInFlight)
	if idle, ok := m.activity.idle(name, now); ok {
		text += "; idle " + age(idle)
	}
	return text
}

// templateDetails is F3 on a template.
func (m *model) templateDetails() []string {
	t := m.template(m.details)
	if t == nil {
		return []string{"", " " + m.st.warn.Render(m.details+" is no longer listed. esc goes back to the lists.")}
	}
	status := t.Status
	if t.Note != "" {
		status += ": " + t.Note
	}
	source := t.Source
	if t.Path != "" {
		source += " (" + t.Path + ")"
	}
	lines := []string{
		" " + m.st.label.Render(t.Name),
		"",
		m.field("Status", m.statusStyle(t.Status).Render(status)),
		m.field("Source", source),
		m.field("From", orDash(t.From)),
		m.field("Tools", orDash(strings.Join(t.Tools, ", "))),
	}
	if t.Description != "" {
		lines = append(lines, "")
		for _, line := range wrap(t.Description, m.width-2) {
			lines = append(lines, " "+line)
		}
	}
	return lines
}
