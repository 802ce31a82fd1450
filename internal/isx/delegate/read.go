package delegate

import (
	"context"
	"errors"
	"time"

	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/task"
)

// Read is a delegate task as read from its instance, with what its latest
// run's event stream says.
type Read struct {
	Run     *task.DelegateRun
	Record  *task.Delegate // nil when the task is not a delegate task
	Adapter Adapter        // nil when the record names no known agent
	Report  Report
	// Session is the conversation a follow-up resumes; empty until the
	// agent has saved one.
	Session string
	// Unrecorded is why a session the stream named for the first time
	// could not be written into the task's record (nil when it was, or
	// when there was none).
	Unrecorded error
}

// ReadTask reads task id in instance name and its latest run's stream
// (head and tail bytes), and records a session the stream names for the
// first time, so that a follow-up resumes exactly it.
func ReadTask(ctx context.Context, client *incus.Client, name, id string, head, tail int64) (*Read, error) {
	run, err := task.ReadDelegate(ctx, client, name, id, head, tail)
	if err != nil {
		return nil, err
	}
	d := &Read{Run: run, Session: run.Session}
	rec := run.Status.Record
	if rec == nil || rec.Kind != task.KindDelegate || rec.Delegate == nil {
		return d, nil
	}
	d.Record = rec.Delegate
	if d.Adapter, err = Of(rec.Delegate.Agent); err != nil {
		d.Adapter = nil
		return d, nil
	}
	d.Report = d.Adapter.Parse(run.Stream())
	if saver, ok := d.Adapter.(Saver); ok {
		// ISX-108, ISX-109, ISX-110: Pi's session counts once Pi saved it, and no
		// longer once it is gone.
		session := d.Session
		if session == "" && run.Status.Run == 1 {
			session = d.Report.SessionID
		}
		if !task.ValidSession(session) || !sessionSaved(ctx, client, name, saver.SessionFiles(session)) {
			d.Session = ""
			return d, nil
		}
	}
	if d.Session == "" && task.ValidSession(d.Report.SessionID) && run.Status.Run == 1 {
		// A cancelled write may still have landed; the session is the
		// stream's either way.
		if err := task.SetSession(ctx, client, name, id, d.Report.SessionID); err != nil && !errors.Is(err, context.Canceled) {
			d.Unrecorded = err
		} else {
			d.Session = d.Report.SessionID
		}
	}
	return d, nil
}

// sessionSavedScript succeeds when a file matches the pattern.
const sessionSavedScript = `set +f
for f in $1; do [ -e "$f" ] && exit 0; done
exit 1`

// sessionSaved reports whether the agent saved the session in the
// instance (a file matches pattern).
func sessionSaved(ctx context.Context, client *incus.Client, name, pattern string) bool {
	res, err := client.Exec(ctx, name, incus.ExecRequest{
		Command: []string{"sh", "-c", sessionSavedScript, "isx-saved", pattern},
		UID:     task.AgentUID, GID: task.AgentGID, Cwd: task.AgentHome, Timeout: 30 * time.Second,
	})
	return err == nil && res.ExitCode == 0
}
