// Package tracing exports a program's spans over OTLP/HTTP to the tracing
// backend its operator already runs, configured the standard way: by
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT (off
// when neither is set, or when OTEL_SDK_DISABLED or OTEL_TRACES_EXPORTER=none
// says so), OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES,
// OTEL_BSP_SCHEDULE_DELAY, and the exporter's timeout and CA certificate;
// the exporter itself reads its headers and compression. A trace continues
// the W3C traceparent a client sent.
package tracing

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/incusspawn/isx/internal/coded"
)

// CodeConfig is the code of a tracing setting that cannot be used.
const CodeConfig = "tracing_config_invalid"

// Provider makes the program's tracer; Shutdown sends what is still
// queued. The zero of a program without tracing is Off.
type Provider struct {
	tracer   trace.Tracer
	shutdown func(context.Context) error
}

// Off traces nothing, at no cost.
var Off = &Provider{shutdown: func(context.Context) error { return nil }}

// Tracer is the program's tracer, nil when tracing is off: a component
// given none makes no span at all.
func (p *Provider) Tracer() trace.Tracer { return p.tracer }

// On reports whether spans go anywhere.
func (p *Provider) On() bool { return p != Off }

// Shutdown flushes the spans still queued and stops the exporter.
func (p *Provider) Shutdown(ctx context.Context) error { return p.shutdown(ctx) }

// FromEnv is the provider the environment asks for, read with getenv;
// service names the program where OTEL_SERVICE_NAME does not.
func FromEnv(ctx context.Context, getenv func(string) string, service, version string) (*Provider, error) {
	endpoint, err := endpointOf(getenv)
	if err != nil || endpoint == "" {
		return Off, err
	}
	// A client of its own, closed with the provider: the exporter's
	// default transport is shared by the process and never lets its
	// connections go. So the settings of that client are read here.
	client, transport, err := exportClient(getenv)
	if err != nil {
		return Off, err
	}
	exporter, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint), otlptracehttp.WithHTTPClient(client))
	if err != nil {
		return Off, coded.Wrap(CodeConfig, err, "the OTLP trace exporter for %s cannot be made", endpoint)
	}
	if name := getenv("OTEL_SERVICE_NAME"); name != "" {
		service = name
	}
	attributes, err := resourceAttributes(getenv("OTEL_RESOURCE_ATTRIBUTES"))
	if err != nil {
		return Off, err
	}
	res, err := resource.Merge(resource.NewSchemaless(attributes...),
		resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(service), semconv.ServiceVersion(version)))
	if err != nil {
		return Off, coded.Wrap(CodeConfig, err, "the trace resource cannot be made")
	}
	batching, err := batchOptions(getenv)
	if err != nil {
		return Off, err
	}
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter, batching...), sdktrace.WithResource(res))
	shutdown := func(ctx context.Context) error {
		defer transport.CloseIdleConnections()
		return sdk.Shutdown(ctx)
	}
	return &Provider{tracer: sdk.Tracer(service), shutdown: shutdown}, nil
}

// exportClient is the exporter's HTTP client: OTEL_EXPORTER_OTLP_TIMEOUT
// (or its TRACES_ form, milliseconds, 10 s by default) bounds an export,
// and OTEL_EXPORTER_OTLP_CERTIFICATE (or its TRACES_ form) names the CA
// that signed an https receiver's certificate.
func exportClient(getenv func(string) string) (*http.Client, *http.Transport, error) {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	timeout := 10 * time.Second
	if setting, value := tracesSetting(getenv, "TIMEOUT"); value != "" {
		ms, err := strconv.Atoi(value)
		if err != nil || ms <= 0 {
			return nil, nil, coded.New(CodeConfig, "%s=%q is not a number of milliseconds", setting, value)
		}
		timeout = time.Duration(ms) * time.Millisecond
	}
	if setting, file := tracesSetting(getenv, "CERTIFICATE"); file != "" {
		pem, err := os.ReadFile(file)
		pool := x509.NewCertPool()
		if err != nil || !pool.AppendCertsFromPEM(pem) {
			return nil, nil, coded.New(CodeConfig, "%s=%q names no readable PEM certificate", setting, file)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: transport, Timeout: timeout}, transport, nil
}

// tracesSetting is OTEL_EXPORTER_OTLP_TRACES_<name>, or the general
// OTEL_EXPORTER_OTLP_<name>, with the name of the one set.
func tracesSetting(getenv func(string) string, name string) (string, string) {
	for _, setting := range []string{"OTEL_EXPORTER_OTLP_TRACES_" + name, "OTEL_EXPORTER_OTLP_" + name} {
		if value := getenv(setting); value != "" {
			return setting, value
		}
	}
	return "", ""
}

// endpointOf is the traces URL: the signal's own endpoint as it is, or
// the general one with /v1/traces, as the specification says.
func endpointOf(getenv func(string) string) (string, error) {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || strings.EqualFold(getenv("OTEL_TRACES_EXPORTER"), "none") {
		return "", nil
	}
	endpoint := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	setting := "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	if endpoint == "" {
		setting = "OTEL_EXPORTER_OTLP_ENDPOINT"
		if general := getenv(setting); general != "" {
			endpoint = strings.TrimSuffix(general, "/") + "/v1/traces"
		}
	}
	if endpoint == "" {
		return "", nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", coded.New(CodeConfig, "%s=%q is not an http or https URL", setting, endpoint).
			WithHint("Set it to the OTLP/HTTP receiver, for example http://127.0.0.1:4318, or unset it to trace nothing.")
	}
	return endpoint, nil
}

// batchOptions reads OTEL_BSP_SCHEDULE_DELAY (milliseconds), how long a
// span may wait to be sent with others; the SDK's default is 5 s.
func batchOptions(getenv func(string) string) ([]sdktrace.BatchSpanProcessorOption, error) {
	setting := getenv("OTEL_BSP_SCHEDULE_DELAY")
	if setting == "" {
		return nil, nil
	}
	ms, err := strconv.Atoi(setting)
	if err != nil || ms < 0 {
		return nil, coded.New(CodeConfig, "OTEL_BSP_SCHEDULE_DELAY=%q is not a number of milliseconds", setting)
	}
	return []sdktrace.BatchSpanProcessorOption{sdktrace.WithBatchTimeout(time.Duration(ms) * time.Millisecond)}, nil
}

// resourceAttributes reads OTEL_RESOURCE_ATTRIBUTES: key=value pairs,
// comma-separated, values percent-encoded.
func resourceAttributes(setting string) ([]attribute.KeyValue, error) {
	var out []attribute.KeyValue
	for pair := range strings.SplitSeq(setting, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		key, value, ok := strings.Cut(pair, "=")
		decoded, err := url.PathUnescape(strings.TrimSpace(value))
		if !ok || strings.TrimSpace(key) == "" || err != nil {
			return nil, coded.New(CodeConfig, "OTEL_RESOURCE_ATTRIBUTES holds %q, which is not key=value", pair)
		}
		out = append(out, attribute.String(strings.TrimSpace(key), decoded))
	}
	return out, nil
}

// Propagator reads and writes W3C trace context (traceparent, tracestate).
var Propagator = propagation.TraceContext{}

// Continue is ctx carrying the trace a request's traceparent names, if any.
func Continue(ctx context.Context, header http.Header) context.Context {
	return Propagator.Extract(ctx, propagation.HeaderCarrier(header))
}

// Shutdown is p.Shutdown, reported as a sentence when spans were lost.
func Shutdown(ctx context.Context, p *Provider) error {
	if err := p.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("tracing: sending the last spans: %w", err)
	}
	return nil
}
