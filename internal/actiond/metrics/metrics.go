// Package metrics is actiond's Prometheus exposition: the MCP endpoint's
// requests by server, method and status with their latency, admissions
// refused by reason, the database's commit latency, and, read from the
// database when scraped, the task queue's depth and age and the sessions
// open. Served at GET /metrics only with `actiond serve --metrics`: the
// numbers name servers and show how busy they are.
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/incusspawn/isx/internal/actiond/store"
)

// Path is where the metrics are served.
const Path = "/metrics"

// Gauges reads what the database holds now.
type Gauges interface {
	ReadGauges(ctx context.Context) (store.Gauges, error)
}

// gaugeTimeout bounds a scrape's reads of the database.
const gaugeTimeout = 5 * time.Second

// Latency buckets, in seconds: from a cached tools/list to a call that
// runs for minutes.
var (
	requestBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 600}
	commitBuckets  = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}
)

// Metrics collects actiond's metrics. Its methods are safe for concurrent
// use, and the endpoint's cost no more than client_golang's lookups.
type Metrics struct {
	registry  *prometheus.Registry
	requests  *prometheus.CounterVec
	durations *prometheus.HistogramVec
	refused   *prometheus.CounterVec
	commits   prometheus.Histogram
	gauges    atomic.Pointer[gaugeSource]
}

type gaugeSource struct{ Gauges }

// New makes the metrics; ReadFrom names the database their gauges read.
func New() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "actiond_mcp_requests_total",
			Help: "MCP requests answered, by server (empty when the request named none the caller may see), JSON-RPC method (other when unknown, empty when the request could not be read) and HTTP status (0 when the client left first).",
		}, []string{"server", "method", "status"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "actiond_mcp_request_duration_seconds",
			Help:    "Time from an MCP request's arrival to its answer, recorded first, by server and method.",
			Buckets: requestBuckets,
		}, []string{"server", "method"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "actiond_mcp_refusals_total",
			Help: "MCP requests refused before or at admission, by the refusal's code (mcp_unauthorized, mcp_rate_limited, session_closed, ...).",
		}, []string{"reason"}),
		commits: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "actiond_store_commit_duration_seconds",
			Help:    "Time the database took to COMMIT a read-write transaction (a group of writes).",
			Buckets: commitBuckets,
		}),
	}
	m.registry.MustRegister(m.requests, m.durations, m.refused, m.commits, gaugeCollector{m},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// ReadFrom names the database the gauges read when scraped.
func (m *Metrics) ReadFrom(g Gauges) { m.gauges.Store(&gaugeSource{g}) }

// Handler serves the exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Answered counts one request and its latency.
func (m *Metrics) Answered(server, method string, status int, elapsed time.Duration) {
	m.requests.WithLabelValues(server, method, statusLabel(status)).Inc()
	m.durations.WithLabelValues(server, method).Observe(elapsed.Seconds())
}

// Refused counts one refusal.
func (m *Metrics) Refused(reason string) { m.refused.WithLabelValues(reason).Inc() }

// ObserveCommit records one commit's latency (store.Options.ObserveCommit).
func (m *Metrics) ObserveCommit(elapsed time.Duration) { m.commits.Observe(elapsed.Seconds()) }

// statusLabels are the HTTP statuses as text, made once.
var statusLabels = func() [600]string {
	var out [600]string
	for i := range out {
		out[i] = strconv.Itoa(i)
	}
	return out
}()

func statusLabel(status int) string {
	if status < 0 || status >= len(statusLabels) {
		return "other"
	}
	return statusLabels[status]
}

var (
	queuedDesc = prometheus.NewDesc("actiond_tasks_waiting",
		"Tasks waiting for a worker in the database (every process's), by state: queued for a first attempt, or retrying.", []string{"state"}, nil)
	oldestDesc = prometheus.NewDesc("actiond_task_queue_oldest_seconds",
		"How long the task that has waited longest since it could be claimed has waited.", nil, nil)
	sessionsDesc = prometheus.NewDesc("actiond_sessions_open",
		"MCP sessions in the database not closed.", nil, nil)
)

// gaugeCollector reads the gauges from the database at each scrape.
type gaugeCollector struct{ m *Metrics }

func (g gaugeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queuedDesc
	ch <- oldestDesc
	ch <- sessionsDesc
}

func (g gaugeCollector) Collect(ch chan<- prometheus.Metric) {
	source := g.m.gauges.Load()
	if source == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), gaugeTimeout)
	defer cancel()
	read, err := source.ReadGauges(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(sessionsDesc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(queuedDesc, prometheus.GaugeValue, float64(read.Queued), "queued")
	ch <- prometheus.MustNewConstMetric(queuedDesc, prometheus.GaugeValue, float64(read.Retrying), "retrying")
	ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, read.OldestDue.Seconds())
	ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(read.OpenSessions))
}
