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

// What leaves the proxy has no proxy header, however a CGI program would
// spell it, no X-Isx- header and no header carrying the instance secret;
// the instance's other headers stay.
func TestCleanOutbound(t *testing.T) {
	const secret = "isx-instance-secret-0123456789"
	h := http.Header{
		"Proxy": {"http://attacker.example"}, "Proxy-Foo": {"x"}, "Proxy_bar": {"y"},
		"Proxy-Authorization": {"Basic isx"}, "Proxy-Connection": {"keep-alive"},
		"X-Isx-Instance-Secret": {secret}, "X_isx_template": {"forged"},
		"Authorization": {"Bearer " + secret}, "X-Kept": {"a value"}, "Proxyish": {"kept"},
	}
	cleanOutbound(h, secret)
	if len(h) != 2 || h.Get("X-Kept") != "a value" || h.Get("Proxyish") != "kept" {
		t.Errorf("headers after = %v", h)
	}
}
