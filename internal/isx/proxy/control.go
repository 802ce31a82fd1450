package proxy

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/incus"
)

// The control API: HTTP over the control socket, which only the user can
// reach (a 0600 socket in a 0700 directory).
//
//	GET  /v1/status                 Status
//	GET  /v1/activity               Report: every instance the proxy knows
//	GET  /v1/activity/{instance}    Activity (without counting_since when unknown)
//	POST /v1/admit/{instance}       Activity, once the proxy serves the instance's current start
//	GET  /v1/activity/watch        a Report per line: at once, then after each change
//	POST /v1/stop                   the proxy ends
//	GET  /metrics                   the activity as Prometheus metrics (metrics.go)

// Status is what `isx proxy status` shows.
type Status struct {
	PID       int    `json:"pid"`
	Version   string `json:"version"`
	Project   string `json:"project"`
	StartedAt string `json:"started_at"`
	Instances int    `json:"instances"`
	Accounts  int    `json:"accounts"`
	Log       string `json:"log"`
	CA        string `json:"ca"`
}

// Report is the activity of every instance the proxy knows.
type Report struct {
	Project   string     `json:"project"`
	StartedAt string     `json:"started_at"`
	Instances []Activity `json:"instances"`
}

// controlError is the body of a refused control request.
type controlError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (s *Server) controlHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		known := len(s.entries)
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, Status{
			PID: os.Getpid(), Version: s.opts.Version, Project: s.project(), StartedAt: formatTime(s.startedAt),
			Instances: known, Accounts: s.currentAccounts().Count(),
			Log: filepath.Join(s.dir, LogFile), CA: filepath.Join(s.dir, "ca.pem"),
		})
	})
	mux.HandleFunc("GET /v1/activity", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, Report{Project: s.project(), StartedAt: formatTime(s.startedAt), Instances: s.Activity()})
	})
	mux.HandleFunc("GET /v1/activity/watch", s.watchActivity)
	mux.Handle("GET "+MetricsPath, s.metricsHandler())
	mux.HandleFunc("GET /v1/activity/{instance}", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.activityOf(r.PathValue("instance")))
	})
	mux.HandleFunc("POST /v1/admit/{instance}", func(w http.ResponseWriter, r *http.Request) {
		activity, err := s.Admit(r.Context(), r.PathValue("instance"))
		if err != nil {
			status := http.StatusConflict
			if errors.Is(err, incus.ErrUnavailable) || coded.CodeOf(err) == "" || incus.Reported(err) {
				status = http.StatusBadGateway
			}
			writeJSON(w, status, controlError{Code: codeOr(err, CodeControl), Message: err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, activity)
	})
	mux.HandleFunc("POST /v1/stop", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusAccepted, map[string]string{"stopping": "yes"})
		s.Stop()
	})
	return mux
}

// codeOr is the proxy's own code of err, or fallback: what Incus reported
// is the proxy's failure to its client.
func codeOr(err error, fallback string) string {
	if code := coded.CodeOf(err); code != "" && !incus.Reported(err) {
		return code
	}
	return fallback
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) //nolint:errcheck // the caller may be gone
}

// watchGap is the least time between two reports of a watch: a streamed
// model answer changes the counts at every event, and a person reads a
// screen no faster.
const watchGap = 250 * time.Millisecond

// watchActivity streams a Report at once and again after every change,
// one JSON object per line, until the client goes away or the proxy stops.
func (s *Server) watchActivity(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeJSON(w, http.StatusInternalServerError, controlError{Code: CodeControl, Message: "this connection cannot stream"})
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	for {
		changed := s.changed.wait()
		if err := enc.Encode(Report{Project: s.project(), StartedAt: formatTime(s.startedAt), Instances: s.Activity()}); err != nil {
			return
		}
		flusher.Flush()
		select {
		case <-r.Context().Done():
			return
		case <-changed:
		}
		select {
		case <-r.Context().Done():
			return
		case <-s.opts.Clock.After(watchGap):
		}
	}
}
