package audit

import (
	"encoding/json"
	"regexp"
	"strings"
)

// Redacted replaces every secret the scrubber finds.
const Redacted = "[scrubbed]"

// secretName matches names (JSON keys, environment variables, flags) whose
// values are credentials. "idempotency_key" and its spellings are names of
// isx's own retry keys, not secrets, and are checked for first.
var secretName = regexp.MustCompile(`(?i)token|secret|passw(or)?d|passphrase|credential|auth($|[_-]|orization|token)|cookie|session[_-]?key|private|api[_-]?key|access[_-]?key|(^|[_-])key$|^key([_-]|$)`)

var notSecretNames = map[string]bool{"idempotency_key": true, "idempotency-key": true, "idempotencykey": true}

// secretKey reports whether a value stored under name is to be scrubbed.
func secretKey(name string) bool {
	if notSecretNames[strings.ToLower(name)] {
		return false
	}
	return secretName.MatchString(name)
}

// textRule replaces what its pattern matches with replace, in which ${n}
// keeps a submatch (the part before the secret) and Redacted stands for
// the secret.
type textRule struct {
	pattern *regexp.Regexp
	replace string
}

// textRules recognise credentials inside free text: command lines, output,
// messages. They favour scrubbing too much over too little.
var textRules = []textRule{
	// PEM private keys, whole.
	{regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)`), Redacted},
	// Authorization headers and bearer tokens.
	{regexp.MustCompile(`(?i)(authorization["']?\s*[:=]\s*["']?(?:(?:bearer|basic|token|digest)\s+)?)[^\s"',;]+`), "${1}" + Redacted},
	{regexp.MustCompile(`(?i)(\bbearer\s+)[A-Za-z0-9._~+/=-]{6,}`), "${1}" + Redacted},
	// Well-known token shapes.
	{regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{10,}`), Redacted},
	{regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,})`), Redacted},
	{regexp.MustCompile(`\bglpat-[A-Za-z0-9_-]{16,}`), Redacted},
	{regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9-]{8,}`), Redacted},
	{regexp.MustCompile(`\b(?:AKIA|ASIA|A3T[A-Z0-9]|ABIA|ACCA)[A-Z0-9]{16}\b`), Redacted},
	{regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{30,}`), Redacted},
	{regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*`), Redacted},
	// Credentials in URLs: scheme://user:password@host.
	{regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://[^\s/:@]*:)[^\s/@]+@`), "${1}" + Redacted + "@"},
	// NAME=value and NAME: value where NAME says secret (env assignments,
	// config lines, JSON written as text).
	{regexp.MustCompile(`(?i)(\b[A-Za-z0-9_.-]*(?:token|secret|passw(?:or)?d|passphrase|credential|api[_-]?key|access[_-]?key|private[_-]?key|auth[_-]?token)[A-Za-z0-9_.-]*["']?\s*[=:]\s*)(?:"[^"]*"|'[^']*'|[^\s"',;]+)`), "${1}" + Redacted},
	// --token VALUE, --password=VALUE and the like.
	{regexp.MustCompile(`(?i)(--?(?:token|secret|password|passwd|api-key|apikey|access-key|auth-token)(?:=|\s+))(?:"[^"]*"|'[^']*'|\S+)`), "${1}" + Redacted},
}

// ScrubText replaces every credential it recognises in s with Redacted.
func ScrubText(s string) string {
	for _, rule := range textRules {
		if rule.pattern.MatchString(s) {
			s = rule.pattern.ReplaceAllString(s, rule.replace)
		}
	}
	return s
}

// Scrub returns a copy of a decoded JSON value (maps, slices, strings,
// numbers, booleans) with the values of secret-named keys replaced and
// every string scrubbed with ScrubText.
func Scrub(v any) any {
	switch value := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(value))
		for key, inner := range value {
			if secretKey(key) {
				out[key] = Redacted
				continue
			}
			out[key] = Scrub(inner)
		}
		return out
	case []any:
		out := make([]any, len(value))
		for i, inner := range value {
			out[i] = Scrub(inner)
		}
		return out
	case string:
		return ScrubText(value)
	}
	return v
}

// ScrubJSON scrubs an encoded JSON value. Text that is not JSON is kept as
// a scrubbed JSON string, so nothing unscrubbed slips through.
func ScrubJSON(raw []byte) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		v = string(raw)
	}
	out, err := json.Marshal(Scrub(v))
	if err != nil {
		// A decoded JSON value always encodes again.
		out, _ = json.Marshal(Redacted)
	}
	return out
}
