package tui

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/task"
)

type view int

const (
	viewLists view = iota
	viewDetails
	viewMission
	viewHelp
)

type pane int

const (
	paneTemplates pane = iota
	paneInstances
)

// selection is where the cursor is in a list: the selected row's name, so
// that it stays on the same row when the list changes, and its index, so
// that it lands on a neighbour when that row goes.
type selection struct {
	name   string
	index  int
	offset int // the first row shown
}

// taskView is what the TUI knows of one instance's tasks.
type taskView struct {
	// fingerprint is what of the instance the reading was made for (its
	// state and the stamps isx mcp changes when tasks start and end).
	fingerprint string
	infos       []task.Info
	err         error
	read        bool // a reading has arrived
	// watching is the ids a task.Wait watches; cancel ends that watch.
	watching string
	cancel   context.CancelFunc
}

type model struct {
	opts Options
	rt   *runtime
	keys keyMap
	st   styles
	help help.Model

	width, height int
	view          view
	back          view // where esc goes from details and help
	pane          pane
	sel           [2]selection
	mission       selection

	// details is the instance (or, with detailsTemplate, the template)
	// that F3 shows.
	details         string
	detailsTemplate bool
	viewport        viewport.Model

	listing      *Listing
	listErr      error
	refreshing   bool
	refreshAgain bool
	streamErr    error

	filter    textinput.Model
	filtering bool

	prompt  *branchPrompt
	confirm *destroyConfirm

	busy       map[string]string // instance or template → what is under way
	message    string
	messageBad bool

	building    string
	buildLines  []string
	buildFailed bool

	tasks       map[string]*taskView
	activity    *reading
	activityErr error
}

func newModel(opts Options, rt *runtime) *model {
	st := newStyles()
	m := &model{
		opts:     opts,
		rt:       rt,
		keys:     newKeyMap(),
		st:       st,
		help:     st.helpModel(),
		filter:   st.textInput("filter: "),
		busy:     map[string]string{},
		tasks:    map[string]*taskView{},
		viewport: viewport.New(),
		pane:     paneInstances,
	}
	return m
}

func (m *model) clock() clock.Clock { return m.opts.Clock }

func (m *model) Init() tea.Cmd {
	m.refresh()
	return nil
}

// refresh reads the listing again, unless a reading is under way: then
// one more follows it, so that a burst of events costs two readings.
func (m *model) refresh() {
	if m.refreshing {
		m.refreshAgain = true
		return
	}
	m.refreshing = true
	lister := m.opts.Lister
	m.rt.spawn(func(ctx context.Context) tea.Msg {
		listing, err := lister.Listing(ctx)
		return listingMsg{listing: listing, err: err}
	})
}

func (m *model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		return m, nil
	case tea.KeyPressMsg:
		return m, m.key(msg)
	case listingMsg:
		m.listed(msg)
	case changedMsg:
		m.refresh()
	case streamMsg:
		m.streamErr = msg.err
		if msg.err == nil {
			m.refresh()
		}
	case tasksMsg:
		m.tasksRead(msg)
	case taskChangedMsg:
		m.taskChanged(msg)
	case activityMsg:
		m.activityErr = msg.err
		if msg.err == nil {
			m.activity = &reading{counts: msg.counts, at: msg.at}
		}
	case doneMsg:
		return m, m.done(msg)
	case buildLineMsg:
		m.buildLines = append(m.buildLines, string(msg))
		if len(m.buildLines) > maxBuildLines {
			m.buildLines = m.buildLines[len(m.buildLines)-maxBuildLines:]
		}
	case tickMsg:
	}
	return m, nil
}

// listed takes a new listing: selections follow their rows, and the
// tasks of instances that changed are read again.
func (m *model) listed(msg listingMsg) {
	m.refreshing = false
	if m.refreshAgain {
		m.refreshAgain = false
		m.refresh()
	}
	m.listErr = msg.err
	if msg.err != nil {
		return
	}
	hadInstances := m.listing == nil || len(m.listing.Instances) > 0
	m.listing = msg.listing
	// With no instance there is nothing to do in their list: the keys,
	// and the empty list's "select a template and press b", are the
	// templates'.
	if hadInstances && m.pane == paneInstances && len(m.listing.Instances) == 0 && len(m.listing.Templates) > 0 {
		m.pane = paneTemplates
	}
	m.follow()
	m.readChangedTasks()
}

// unavailable is the reason Incus does not answer, or nil.
func (m *model) unavailable() error {
	for _, err := range []error{m.listErr, m.streamErr} {
		if errors.Is(err, incus.ErrUnavailable) {
			return err
		}
	}
	return nil
}

// mcpInstances are the listed instances isx mcp made.
func (m *model) mcpInstances() []*instance.Entry {
	if m.listing == nil {
		return nil
	}
	var out []*instance.Entry
	for i := range m.listing.Instances {
		if e := &m.listing.Instances[i]; e.Stamps.MCP.Owner != "" {
			out = append(out, e)
		}
	}
	return out
}

// fingerprint is what of an instance says its tasks may have changed.
func fingerprint(e *instance.Entry) string {
	return e.Status + "|" + e.Stamps.MCP.Running + "|" + e.Stamps.MCP.TaskKeys + "|" + e.Stamps.Created.String()
}

// readChangedTasks reads the tasks of every running MCP instance whose
// fingerprint changed since its tasks were last read, and forgets the
// instances that are gone.
func (m *model) readChangedTasks() {
	seen := map[string]bool{}
	for _, e := range m.mcpInstances() {
		seen[e.Name] = true
		tv := m.tasks[e.Name]
		if tv == nil {
			tv = &taskView{}
			m.tasks[e.Name] = tv
		}
		fp := fingerprint(e)
		if tv.fingerprint == fp {
			continue
		}
		tv.fingerprint = fp
		if !e.Instance.Running() {
			tv.stopWatching()
			continue
		}
		m.rt.readTasks(m.opts.Incus, e.Name, fp)
	}
	for name, tv := range m.tasks {
		if !seen[name] {
			tv.stopWatching()
			delete(m.tasks, name)
		}
	}
}

func (tv *taskView) stopWatching() {
	if tv.cancel != nil {
		tv.cancel()
	}
	tv.cancel, tv.watching = nil, ""
}

// tasksRead takes an instance's tasks and watches the running ones.
func (m *model) tasksRead(msg tasksMsg) {
	tv := m.tasks[msg.instance]
	if tv == nil || tv.fingerprint != msg.fingerprint {
		return // the instance changed again since; a newer reading follows
	}
	tv.read, tv.err = true, msg.err
	if msg.err == nil {
		tv.infos = msg.infos // after a failed read, what was read before stays
	}
	var running []string
	for _, info := range msg.infos {
		if info.State == task.StateRunning && len(running) < task.MaxWaitTasks {
			running = append(running, info.ID)
		}
	}
	slices.Sort(running)
	if msg.err != nil {
		tv.stopWatching()
		m.retryTasks(msg.instance)
		return
	}
	if want := idsKey(running); want != tv.watching {
		tv.stopWatching()
		if len(running) > 0 {
			tv.watching = want
			tv.cancel = m.rt.waitTasks(m.opts.Incus, msg.instance, running)
		}
	}
}

// rewatchAfter is how long after a failed read or watch of an instance's
// tasks they are read (and watched) again.
const rewatchAfter = 5 * time.Second

// retryTasks reads an instance's tasks again a little later: a read or
// watch failed (the instance busy or starting, Incus away), and a task must
// not show running for ever.
func (m *model) retryTasks(name string) {
	clk := m.opts.Clock
	m.rt.spawn(func(ctx context.Context) tea.Msg {
		select {
		case <-ctx.Done():
			return nil
		case <-clk.After(rewatchAfter):
			return taskChangedMsg{instance: name}
		}
	})
}

// taskChanged reads an instance's tasks again after its watch ended.
func (m *model) taskChanged(msg taskChangedMsg) {
	tv, e := m.tasks[msg.instance], m.entry(msg.instance)
	if tv == nil || e == nil || !e.Instance.Running() {
		return // gone or stopped: read again when it runs
	}
	tv.cancel, tv.watching = nil, ""
	if msg.err != nil {
		// The watch failed (the instance busy, Incus away): look again a
		// little later rather than show a task running for ever.
		tv.err = msg.err
		m.retryTasks(msg.instance)
		return
	}
	m.rt.readTasks(m.opts.Incus, msg.instance, tv.fingerprint)
}

// key handles a key press: a prompt or the filter takes keys first.
func (m *model) key(msg tea.KeyPressMsg) tea.Cmd {
	if msg.String() == "ctrl+c" {
		return tea.Quit
	}
	switch {
	case m.prompt != nil:
		return m.promptKey(msg)
	case m.confirm != nil:
		return m.confirmKey(msg)
	case m.filtering:
		return m.filterKey(msg)
	}
	switch m.view {
	case viewHelp:
		if key.Matches(msg, m.keys.Back, m.keys.Help, m.keys.Quit) {
			m.switchTo(m.back)
		}
		return nil
	case viewDetails:
		return m.detailsKey(msg)
	case viewMission:
		return m.missionKey(msg)
	}
	return m.listsKey(msg)
}

func (m *model) showHelp() {
	m.back = m.view
	m.switchTo(viewHelp)
}

// switchTo shows another view; the last action's outcome stays behind.
func (m *model) switchTo(v view) {
	if m.view != v {
		m.message, m.messageBad = "", false
	}
	m.view = v
}

// filterKey edits the filter: enter keeps it, esc drops it.
func (m *model) filterKey(msg tea.KeyPressMsg) tea.Cmd {
	switch msg.String() {
	case "enter":
		m.filtering = false
		m.filter.Blur()
		return nil
	case "esc":
		m.filtering = false
		m.filter.Blur()
		m.filter.SetValue("")
		m.follow()
		return nil
	}
	var cmd tea.Cmd
	m.filter, cmd = m.filter.Update(msg)
	m.follow()
	return cmd
}

// matches says whether a row shows under the filter.
func (m *model) matches(fields ...string) bool {
	want := strings.ToLower(strings.TrimSpace(m.filter.Value()))
	if want == "" {
		return true
	}
	for _, f := range fields {
		if strings.Contains(strings.ToLower(f), want) {
			return true
		}
	}
	return false
}

func (m *model) visibleTemplates() []Template {
	if m.listing == nil {
		return nil
	}
	var out []Template
	for _, t := range m.listing.Templates {
		if m.matches(t.Name, t.Source, t.Status) {
			out = append(out, t)
		}
	}
	return out
}

func (m *model) visibleInstances() []*instance.Entry {
	if m.listing == nil {
		return nil
	}
	var out []*instance.Entry
	for i := range m.listing.Instances {
		e := &m.listing.Instances[i]
		if m.matches(e.Name, e.Stamps.Template, strings.ToLower(e.Status)) {
			out = append(out, e)
		}
	}
	return out
}

func templateNames(ts []Template) []string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	return names
}

func entryNames(es []*instance.Entry) []string {
	names := make([]string, len(es))
	for i, e := range es {
		names[i] = e.Name
	}
	return names
}

// follow keeps each selection on its row, or on the row that took its
// place when it went (deleted, or filtered out).
func (m *model) follow() {
	m.sel[paneTemplates].follow(templateNames(m.visibleTemplates()))
	m.sel[paneInstances].follow(entryNames(m.visibleInstances()))
	m.mission.follow(m.missionKeys())
}

func (s *selection) follow(names []string) {
	if i := slices.Index(names, s.name); i >= 0 {
		s.index = i
		return
	}
	if len(names) == 0 {
		s.name, s.index = "", 0
		return
	}
	s.index = min(max(s.index, 0), len(names)-1)
	s.name = names[s.index]
}

// move shifts the selection by delta rows (clamped to the list).
func (s *selection) move(names []string, delta int) {
	if len(names) == 0 {
		return
	}
	s.follow(names)
	s.index = min(max(s.index+delta, 0), len(names)-1)
	s.name = names[s.index]
}

// moveKey moves a selection for the cursor keys; it reports whether msg
// was one.
func (m *model) moveKey(msg tea.KeyPressMsg, s *selection, names []string, page int) bool {
	switch {
	case key.Matches(msg, m.keys.Up):
		s.move(names, -1)
	case key.Matches(msg, m.keys.Down):
		s.move(names, 1)
	case key.Matches(msg, m.keys.PageUp):
		s.move(names, -max(page, 1))
	case key.Matches(msg, m.keys.PageDown):
		s.move(names, max(page, 1))
	case key.Matches(msg, m.keys.Top):
		s.move(names, -len(names))
	case key.Matches(msg, m.keys.Bottom):
		s.move(names, len(names))
	default:
		return false
	}
	return true
}

func (m *model) listsKey(msg tea.KeyPressMsg) tea.Cmd {
	names := entryNames(m.visibleInstances())
	if m.pane == paneTemplates {
		names = templateNames(m.visibleTemplates())
	}
	if m.moveKey(msg, &m.sel[m.pane], names, m.height/2) {
		return nil
	}
	switch {
	case key.Matches(msg, m.keys.Quit):
		return tea.Quit
	case key.Matches(msg, m.keys.Pane):
		m.pane = 1 - m.pane
	case key.Matches(msg, m.keys.Help):
		m.showHelp()
	case key.Matches(msg, m.keys.Filter):
		// The last action's outcome is about the rows shown before: it
		// would come back, stale, when the filter is kept.
		m.filtering, m.message, m.messageBad = true, "", false
		return m.filter.Focus()
	case key.Matches(msg, m.keys.Back):
		m.filter.SetValue("")
		m.buildLines, m.buildFailed = nil, false
		m.message = ""
		m.follow()
	case key.Matches(msg, m.keys.Mission):
		m.switchTo(viewMission)
	case key.Matches(msg, m.keys.Details):
		if name := m.sel[m.pane].name; name != "" {
			m.openDetails(name, m.pane == paneTemplates)
		}
	case m.pane == paneTemplates:
		return m.templateAction(msg, m.sel[paneTemplates].name)
	default:
		return m.instanceAction(msg, m.sel[paneInstances].name)
	}
	return nil
}

func (m *model) openDetails(name string, template bool) {
	if m.view != viewDetails {
		m.back = m.view
	}
	m.details, m.detailsTemplate = name, template
	m.switchTo(viewDetails)
	m.viewport.GotoTop()
}

func (m *model) detailsKey(msg tea.KeyPressMsg) tea.Cmd {
	switch {
	case key.Matches(msg, m.keys.Back, m.keys.Details):
		m.switchTo(m.back)
		return nil
	case key.Matches(msg, m.keys.Quit):
		return tea.Quit
	case key.Matches(msg, m.keys.Help):
		m.showHelp()
		return nil
	case key.Matches(msg, m.keys.Mission):
		m.switchTo(viewMission)
		return nil
	case key.Matches(msg, m.keys.Up, m.keys.Down, m.keys.PageUp, m.keys.PageDown):
		var cmd tea.Cmd
		m.viewport, cmd = m.viewport.Update(msg)
		return cmd
	case m.detailsTemplate:
		return m.templateAction(msg, m.details)
	}
	return m.instanceAction(msg, m.details)
}

// entry is the listed instance of that name, or nil.
func (m *model) entry(name string) *instance.Entry {
	if m.listing == nil {
		return nil
	}
	for i := range m.listing.Instances {
		if m.listing.Instances[i].Name == name {
			return &m.listing.Instances[i]
		}
	}
	return nil
}

// template is the listed template of that name, or nil.
func (m *model) template(name string) *Template {
	if m.listing == nil {
		return nil
	}
	for i := range m.listing.Templates {
		if m.listing.Templates[i].Name == name {
			return &m.listing.Templates[i]
		}
	}
	return nil
}

func (m *model) project() string {
	if p := m.opts.Incus.ProjectName(); p != "" {
		return p
	}
	return "default"
}

func (m *model) say(text string, bad bool) {
	m.message, m.messageBad = text, bad
}
