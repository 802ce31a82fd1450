package coded

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
)

// domainError is how a domain with more facts uses Error: by embedding it.
type domainError struct {
	Base
	File string
}

func (e *domainError) Error() string { return e.File + ": " + e.Base.Error() }

func TestCodeOfFindsOwnAndEmbeddedErrors(t *testing.T) {
	own := Wrap("not_found", fs.ErrNotExist, "no template %q", "tpl-x")
	embedded := &domainError{Base: Base{Code: "config_invalid", Message: "unknown key"}, File: "mcp.yaml"}
	cases := []struct {
		err  error
		want string
	}{
		{own, "not_found"},
		{fmt.Errorf("loading: %w", own), "not_found"},
		{embedded, "config_invalid"},
		{fmt.Errorf("calling: %w", embedded), "config_invalid"},
		{errors.New("plain"), ""},
		{nil, ""},
	}
	for _, c := range cases {
		if got := CodeOf(c.err); got != c.want {
			t.Errorf("CodeOf(%v) = %q, want %q", c.err, got, c.want)
		}
	}
	if !errors.Is(own, fs.ErrNotExist) {
		t.Error("the cause is not reachable through errors.Is")
	}
	if got := own.Error(); got != `no template "tpl-x": file does not exist` {
		t.Errorf("Error() = %q", got)
	}
	if got := embedded.Error(); got != "mcp.yaml: unknown key" {
		t.Errorf("embedded Error() = %q", got)
	}
}

func TestIsMatchesByCode(t *testing.T) {
	sentinel := &Error{Code: "expired"}
	err := fmt.Errorf("token: %w", New("expired", "the token expired at %s", "10:00"))
	if !errors.Is(err, sentinel) {
		t.Error("a coded error does not match a sentinel of its code")
	}
	if errors.Is(err, &Error{Code: "malformed"}) {
		t.Error("a coded error matches a sentinel of another code")
	}
	if errors.Is(New("", "uncoded"), &Error{}) {
		t.Error("an uncoded error matches an uncoded sentinel")
	}
	embedded := &domainError{Base: Base{Code: "expired"}}
	if !errors.Is(embedded, sentinel) {
		t.Error("an embedding type does not match a sentinel of its code")
	}
}

func TestHintOf(t *testing.T) {
	inner := New("busy", "the instance is busy").WithHint("Retry shortly.")
	outer := Wrap("unavailable", inner, "could not exec")
	if got := HintOf(outer); got != "Retry shortly." {
		t.Errorf("HintOf = %q, want the inner hint", got)
	}
	outer.Hint = "Start the daemon."
	if got := HintOf(outer); got != "Start the daemon." {
		t.Errorf("HintOf = %q, want the outer hint", got)
	}
	if HintOf(errors.New("plain")) != "" {
		t.Error("a plain error has a hint")
	}
}
