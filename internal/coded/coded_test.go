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

// What an error concerns is found anywhere in its chain, an outer naming
// of a kind never replacing the inner one (as On never replaces it); a
// coded error that only says what a failure concerns leaves the code to
// its cause.
func TestAboutAndOf(t *testing.T) {
	cause := New("busy", "the instance is busy").On("instance", "w1").On("task_id", "t-1")
	outer := Wrap("", cause, "").On("instance", "w2")
	err := fmt.Errorf("calling: %w", outer)
	if got := AboutOf(err, "instance"); got != "w1" {
		t.Errorf("AboutOf instance = %q, want the inner w1", got)
	}
	if got := AboutOf(err, "task_id"); got != "t-1" {
		t.Errorf("AboutOf task_id = %q, want the inner t-1", got)
	}
	if got := CodeOf(err); got != "busy" {
		t.Errorf("CodeOf = %q, want the cause's busy past the uncoded wrapper", got)
	}
	if got := Of(err); got != cause {
		t.Errorf("Of = %v, want the cause", got)
	}
	if cause.On("instance", "w3"); cause.About["instance"] != "w1" {
		t.Error("On replaced what the error already named")
	}
	embedded := &domainError{Base: Base{Code: "config_invalid", Message: "unknown key"}, File: "mcp.yaml"}
	embedded.On("field", "templates")
	joined := errors.Join(errors.New("plain"), fmt.Errorf("loading: %w", embedded))
	if Of(joined) != &embedded.Base || AboutOf(joined, "field") != "templates" || CodeOf(joined) != "config_invalid" {
		t.Errorf("a joined, embedded error: Of %v, field %q, code %q", Of(joined), AboutOf(joined, "field"), CodeOf(joined))
	}
	if Of(errors.New("plain")) != nil || AboutOf(nil, "instance") != "" {
		t.Error("a plain error is coded")
	}
}
