package tracing

import (
	"context"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/coded"
)

func env(values map[string]string) func(string) string {
	return func(key string) string { return values[key] }
}

func TestEndpointFromTheStandardVariables(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"nothing set traces nothing", nil, ""},
		{"the general endpoint gets the traces path", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318/"}, "http://127.0.0.1:4318/v1/traces"},
		{"the signal's own endpoint is used as it is", map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://b/otlp/traces"}, "https://b/otlp/traces"},
		{"the SDK disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_SDK_DISABLED": "true"}, ""},
		{"no traces exporter", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_TRACES_EXPORTER": "none"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := endpointOf(env(c.env))
			if err != nil || got != c.want {
				t.Errorf("endpoint = %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

func TestBadSettingsAreRefusedByName(t *testing.T) {
	for setting, value := range map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT":           "127.0.0.1:4318", // no scheme
		"OTEL_RESOURCE_ATTRIBUTES":              "team",
		"OTEL_BSP_SCHEDULE_DELAY":               "soon",
		"OTEL_EXPORTER_OTLP_TIMEOUT":            "-1",
		"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": "/nonexistent/ca.pem",
	} {
		values := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", setting: value}
		p, err := FromEnv(context.Background(), env(values), "actiond", "test")
		if coded.CodeOf(err) != CodeConfig || p.On() {
			t.Errorf("%s=%q: %v (tracing on %v), want %s naming it", setting, value, err, p.On(), CodeConfig)
			continue
		}
		if got := err.Error(); !strings.Contains(got, setting) {
			t.Errorf("%s=%q: %q does not name the setting", setting, value, got)
		}
	}
}

func TestResourceAttributes(t *testing.T) {
	got, err := resourceAttributes("deployment.environment=prod, team=a%20b,,")
	if err != nil || len(got) != 2 || got[0].Value.AsString() != "prod" || got[1].Value.AsString() != "a b" {
		t.Errorf("resource attributes = %v, %v", got, err)
	}
}

func TestOffWithoutAnEndpoint(t *testing.T) {
	p, err := FromEnv(context.Background(), env(nil), "actiond", "test")
	if err != nil || p.On() || p != Off {
		t.Fatalf("FromEnv with nothing set = %v, %v; want Off", p, err)
	}
	if err := Shutdown(context.Background(), p); err != nil {
		t.Error(err)
	}
}
