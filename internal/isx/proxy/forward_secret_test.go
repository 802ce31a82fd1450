package proxy

import (
	"encoding/base64"
	"net/http"
	"testing"
)

// A header the instance named itself still never takes the instance
// secret upstream, plain or base64-encoded; other headers stay.
func TestSecretBearingHeadersAreDropped(t *testing.T) {
	const secret = "isx-instance-secret-0123456789"
	h := http.Header{}
	h.Set("-S-Nstnceerrt", secret)
	h.Set("X-Mine", "Basic "+base64.StdEncoding.EncodeToString([]byte(secret)))
	h.Set("X-Kept", "a value")
	dropSecretBearing(h, secret)
	if len(h) != 1 || h.Get("X-Kept") != "a value" {
		t.Errorf("headers after = %v", h)
	}
	empty := http.Header{"X-Kept": {"v"}}
	dropSecretBearing(empty, "")
	if len(empty) != 1 {
		t.Errorf("an empty secret dropped %v", empty)
	}
}
