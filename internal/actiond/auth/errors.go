package auth

import (
	"errors"
	"fmt"

	"github.com/incusspawn/isx/internal/coded"
)

// Reason says in one word why a token was refused, for logs and records. A
// caller is told only the coarser PublicReason.
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

// Error is a refused token. Its code is the Reason, machine-readable; its
// message is a sentence for the operator reading the log. Neither is meant
// for the caller.
type Error struct {
	coded.Base
	Issuer string // the token's issuer when known
}

// Reason is why the token was refused.
func (e *Error) Reason() Reason { return Reason(e.Code) }

func (e *Error) Error() string {
	msg := "auth: token refused (" + e.Code + ")"
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Sentinels for errors.Is, one per reason: a refusal matches the sentinel
// of its reason.
var (
	ErrMissing         = sentinel(ReasonMissing)
	ErrMalformed       = sentinel(ReasonMalformed)
	ErrBadSignature    = sentinel(ReasonBadSignature)
	ErrUnknownKey      = sentinel(ReasonUnknownKey)
	ErrUnknownIssuer   = sentinel(ReasonUnknownIssuer)
	ErrExpired         = sentinel(ReasonExpired)
	ErrNotYetValid     = sentinel(ReasonNotYetValid)
	ErrWrongAudience   = sentinel(ReasonWrongAudience)
	ErrKeysUnavailable = sentinel(ReasonKeysUnavailable)
)

func sentinel(reason Reason) *Error { return &Error{Base: coded.Base{Code: string(reason)}} }

// ReasonOf returns the reason of an auth error anywhere in err's chain, or ""
// when err is not one.
func ReasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason()
	}
	return ""
}

func refuse(reason Reason, format string, args ...any) *Error {
	return refuseFrom(reason, "", nil, format, args...)
}

// refuseFrom is a refused token whose issuer is known, or that has a cause.
func refuseFrom(reason Reason, issuer string, cause error, format string, args ...any) *Error {
	return &Error{Base: coded.Base{Code: string(reason), Message: fmt.Sprintf(format, args...), Err: cause}, Issuer: issuer}
}

// PublicReason is what a 401 tells the caller about its token: which kind
// of check failed, never which key, issuer, audience or claim value was
// involved, so that a caller can fix its configuration (get a new token,
// ask for the right audience) without learning anything about the server.
type PublicReason string

const (
	PublicMissing          PublicReason = "missing"
	PublicMalformed        PublicReason = "malformed"
	PublicExpired          PublicReason = "expired"
	PublicNotYetValid      PublicReason = "not_yet_valid"
	PublicWrongAudience    PublicReason = "wrong_audience"
	PublicUnknownIssuer    PublicReason = "unknown_issuer"
	PublicInvalidSignature PublicReason = "invalid_signature"
	PublicUnavailable      PublicReason = "unavailable"
)

// publicSentences are the fixed sentences of each public reason: what the
// caller can do about it.
var publicSentences = map[PublicReason]string{
	PublicMissing:          "No bearer token was sent; sign in, or send an Authorization: Bearer header.",
	PublicMalformed:        "The bearer token is not a well-formed token of this server; sign in again.",
	PublicExpired:          "The bearer token has expired; refresh it or sign in again.",
	PublicNotYetValid:      "The bearer token is not valid yet; check this machine's clock.",
	PublicWrongAudience:    "The bearer token is not addressed to this endpoint; get a token for these MCP endpoints.",
	PublicUnknownIssuer:    "The bearer token's issuer is not accepted at this endpoint; sign in at the authorization server its metadata names.",
	PublicInvalidSignature: "The bearer token's signature does not verify; sign in again.",
	PublicUnavailable:      "The bearer token's issuer could not be checked just now; retry shortly.",
}

// Public maps a refusal to what the caller may be told: its reason and a
// sentence. err nil is a missing token.
func Public(err error) (PublicReason, string) {
	if err == nil {
		return PublicMissing, publicSentences[PublicMissing]
	}
	reason := PublicMalformed
	switch ReasonOf(err) {
	case ReasonMissing:
		reason = PublicMissing
	case ReasonExpired:
		reason = PublicExpired
	case ReasonNotYetValid:
		reason = PublicNotYetValid
	case ReasonWrongAudience:
		reason = PublicWrongAudience
	case ReasonUnknownIssuer:
		reason = PublicUnknownIssuer
	case ReasonBadSignature, ReasonUnknownKey:
		reason = PublicInvalidSignature
	case ReasonKeysUnavailable:
		reason = PublicUnavailable
	}
	return reason, publicSentences[reason]
}
