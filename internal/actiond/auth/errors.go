package auth

import (
	"errors"
	"fmt"
)

// Reason says in one word why a token was refused. It is meant for logs and
// records; the HTTP layer answers 401 for every reason alike so that a caller
// learns nothing about which check failed.
type Reason string

const (
	ReasonMissing         Reason = "missing"          // no bearer token was presented
	ReasonMalformed       Reason = "malformed"        // not a well-formed JWT, a required claim absent or mistyped, or a bad Authorization header
	ReasonBadSignature    Reason = "bad_signature"    // signature does not verify, or an algorithm that is never accepted (none, HS*)
	ReasonUnknownKey      Reason = "unknown_key"      // the issuer has no key with the token's kid, even after a refresh
	ReasonUnknownIssuer   Reason = "unknown_issuer"   // iss is not configured, or not accepted for this endpoint's audience
	ReasonExpired         Reason = "expired"          // exp has passed (beyond the leeway)
	ReasonNotYetValid     Reason = "not_yet_valid"    // nbf or iat lies in the future (beyond the leeway)
	ReasonWrongAudience   Reason = "wrong_audience"   // aud does not contain this endpoint's audience
	ReasonKeysUnavailable Reason = "keys_unavailable" // the issuer's JWKS could not be fetched and no keys are known
)

// Error is a refused token. Reason is machine-readable; Detail is a sentence
// for the operator reading the log. Neither is meant for the caller.
type Error struct {
	Reason Reason
	Issuer string // the token's issuer when known
	Detail string
	Err    error
}

func (e *Error) Error() string {
	msg := "auth: token refused (" + string(e.Reason) + ")"
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Is matches another *Error with the same Reason, so that
// errors.Is(err, auth.ErrExpired) works.
func (e *Error) Is(target error) bool {
	var t *Error
	if !errors.As(target, &t) {
		return false
	}
	return t.Reason == e.Reason
}

// Sentinels for errors.Is, one per reason.
var (
	ErrMissing         = &Error{Reason: ReasonMissing}
	ErrMalformed       = &Error{Reason: ReasonMalformed}
	ErrBadSignature    = &Error{Reason: ReasonBadSignature}
	ErrUnknownKey      = &Error{Reason: ReasonUnknownKey}
	ErrUnknownIssuer   = &Error{Reason: ReasonUnknownIssuer}
	ErrExpired         = &Error{Reason: ReasonExpired}
	ErrNotYetValid     = &Error{Reason: ReasonNotYetValid}
	ErrWrongAudience   = &Error{Reason: ReasonWrongAudience}
	ErrKeysUnavailable = &Error{Reason: ReasonKeysUnavailable}
)

// ReasonOf returns the reason of an auth error anywhere in err's chain, or ""
// when err is not one.
func ReasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

func refuse(reason Reason, format string, args ...any) *Error {
	return &Error{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}
