package proxy

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// MetricsPath is where the proxy serves its Prometheus metrics: on the
// control socket, which only the user reaches. They are the counts
// `isx proxy activity` shows, read when scraped, so serving them costs the
// proxied traffic nothing.
const MetricsPath = "/metrics"

// The metrics, one series per instance the proxy knows (its current
// start: the counters begin again when the instance does, which
// Prometheus reads as a counter reset).
var (
	tokensDesc = prometheus.NewDesc("isx_proxy_model_tokens_total",
		"Tokens of the instance's Anthropic model calls as the API reported them, by kind: input, output, cache_read, cache_creation.", []string{"instance", "kind"}, nil)
	callsDesc = prometheus.NewDesc("isx_proxy_model_calls_total",
		"Model calls the instance made.", []string{"instance"}, nil)
	callsInFlightDesc = prometheus.NewDesc("isx_proxy_model_calls_in_flight",
		"Model calls of the instance in progress.", []string{"instance"}, nil)
	requestsDesc = prometheus.NewDesc("isx_proxy_requests_total",
		"Requests the instance made through the proxy: model calls, downloads, git and tunnels.", []string{"instance"}, nil)
	requestsInFlightDesc = prometheus.NewDesc("isx_proxy_requests_in_flight",
		"Requests, tunnels and WebSockets of the instance open now.", []string{"instance"}, nil)
	bytesDesc = prometheus.NewDesc("isx_proxy_bytes_total",
		"Bytes the instance moved through the proxy, by direction: sent or received.", []string{"instance", "direction"}, nil)
	countingSinceDesc = prometheus.NewDesc("isx_proxy_counting_since_seconds",
		"When the proxy began counting the instance (its current start, or the proxy's), as a Unix time.", []string{"instance"}, nil)
)

// activityCollector turns the activity counters into metrics at each
// scrape.
type activityCollector struct{ s *Server }

func (c activityCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{tokensDesc, callsDesc, callsInFlightDesc, requestsDesc, requestsInFlightDesc, bytesDesc, countingSinceDesc} {
		ch <- d
	}
}

func (c activityCollector) Collect(ch chan<- prometheus.Metric) {
	for _, a := range c.s.Activity() {
		name := a.Instance
		counter := func(d *prometheus.Desc, v int64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append([]string{name}, labels...)...)
		}
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, name)
		}
		counter(tokensDesc, a.InputTokens, "input")
		counter(tokensDesc, a.OutputTokens, "output")
		counter(tokensDesc, a.CacheReadInputTokens, "cache_read")
		counter(tokensDesc, a.CacheCreationInputTokens, "cache_creation")
		counter(callsDesc, a.Requests)
		gauge(callsInFlightDesc, float64(a.RequestsInFlight))
		counter(requestsDesc, a.TrafficRequests)
		gauge(requestsInFlightDesc, float64(a.TrafficInFlight))
		counter(bytesDesc, a.TrafficBytesSent, "sent")
		counter(bytesDesc, a.TrafficBytesReceived, "received")
		if since, err := ParseTime(a.CountingSince); err == nil && !since.IsZero() {
			gauge(countingSinceDesc, float64(since.UnixNano())/float64(time.Second))
		}
	}
}

// metricsHandler serves the exposition format.
func (s *Server) metricsHandler() http.Handler {
	registry := prometheus.NewRegistry()
	registry.MustRegister(activityCollector{s})
	return promhttp.HandlerFor(registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
