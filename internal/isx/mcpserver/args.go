package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Arguments reach a tool as raw JSON. They are decoded strictly: an
// argument the tool does not take, a value of the wrong type or out of
// range is a refusal with CodeInvalidArgument, never a guess. Arguments
// that are not a JSON object at all are a protocol fault (see
// server.go).

// Bounds on arguments.
const (
	maxNameHint       = 16
	maxPurpose        = 200
	maxCommandBytes   = 64 << 10
	maxStdinBytes     = 1 << 20
	maxEnvVars        = 128
	defaultTimeout    = 600  // seconds a foreground exec may take by default
	maxTimeout        = 3600 // seconds a foreground exec may take at most
	defaultOutput     = 32 << 10
	maxOutput         = 1 << 20
	maxWaitSeconds    = 300
	defaultWaitAny    = 60
	maxWaitAnyTasks   = 64
	maxInstanceName   = 63
	maxTaskResultSize = 1 << 20
)

var (
	keyPattern      = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)
	hintPattern     = regexp.MustCompile(`^[a-z0-9-]{1,16}$`)
	envNamePattern  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
	instancePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]{0,62}$`)
	taskIDPattern   = regexp.MustCompile(`^t-[a-z2-7]{10}$`)
)

// retiredArguments were taken by older releases and are refused by name.
var retiredArguments = map[string]string{
	"max_turns": "max_turns no longer exists: no agent runs under a turn limit; call again without it",
}

// decodeArgs decodes raw into T, refusing unknown and retired arguments.
func decodeArgs[T any](raw json.RawMessage) (T, *Refusal) {
	var args T
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = json.RawMessage("{}")
	}
	var names map[string]json.RawMessage
	if err := json.Unmarshal(raw, &names); err != nil {
		return args, refusef(CodeInvalidArgument, "the arguments must be a JSON object: %v", err)
	}
	for name := range names {
		if why, retired := retiredArguments[name]; retired {
			return args, refusef(CodeInvalidArgument, "%s", why)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&args); err != nil {
		return args, refusef(CodeInvalidArgument, "%s", describeDecodeError(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return args, refusef(CodeInvalidArgument, "the arguments hold more than one JSON value")
	}
	return args, nil
}

func describeDecodeError(err error) string {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		field := typeErr.Field
		if field == "" {
			field = "the arguments"
		}
		return fmt.Sprintf("%s must be %s, not a JSON %s", field, jsonKind(typeErr.Type.Kind().String()), typeErr.Value)
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return fmt.Sprintf("this tool takes no argument %s; see its inputSchema", name)
	}
	return "the arguments cannot be read: " + strings.TrimPrefix(msg, "json: ")
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "int", "int64", "int32":
		return "a whole number"
	case "map", "struct":
		return "an object"
	case "slice":
		return "an array"
	case "ptr":
		return "a value of the documented type"
	}
	return "of the documented type"
}

func checkInstanceName(field, name string) *Refusal {
	if !instancePattern.MatchString(name) || strings.HasSuffix(name, "-") {
		return refusef(CodeInvalidArgument, "%s %q is not an instance name; list_instances shows the instances you hold", field, clip(name, 80))
	}
	return nil
}

func checkTaskID(id string) *Refusal {
	if !taskIDPattern.MatchString(id) {
		return refusef(CodeInvalidArgument, "task_id %q is not a task id (t- and ten characters of a-z and 2-7)", clip(id, 40))
	}
	return nil
}

// checkKey checks an idempotency key that was given (ISX-156..158).
func checkKey(key *string) *Refusal {
	if key != nil && !keyPattern.MatchString(*key) {
		return refusef(CodeInvalidArgument, "idempotency_key %q is not allowed: use 1 to 64 characters of A-Z, a-z, 0-9, '.', '_', ':' and '-'", clip(*key, 80))
	}
	return nil
}

func checkPurpose(purpose string) *Refusal {
	switch {
	case utf8.RuneCountInString(purpose) > maxPurpose:
		return refusef(CodeInvalidArgument, "purpose is %d characters; give one line of at most %d", utf8.RuneCountInString(purpose), maxPurpose)
	case !utf8.ValidString(purpose):
		return refusef(CodeInvalidArgument, "purpose is not valid UTF-8")
	case strings.IndexFunc(purpose, unicode.IsControl) >= 0:
		return refusef(CodeInvalidArgument, "purpose must be one line without control characters")
	}
	return nil
}

func checkHint(hint string) *Refusal {
	if !hintPattern.MatchString(hint) {
		return refusef(CodeInvalidArgument, "name_hint %q is not allowed: use 1 to %d of a-z, 0-9 and '-'", clip(hint, 40), maxNameHint)
	}
	return nil
}

func checkCwd(cwd string) *Refusal {
	if cwd != "" && (!path.IsAbs(cwd) || strings.ContainsRune(cwd, 0) || len(cwd) > 4096) {
		return refusef(CodeInvalidArgument, "cwd %q must be an absolute path inside the instance", clip(cwd, 80))
	}
	return nil
}

func checkEnv(env map[string]string) *Refusal {
	if len(env) > maxEnvVars {
		return refusef(CodeInvalidArgument, "env has %d variables; at most %d are accepted", len(env), maxEnvVars)
	}
	for name, value := range env {
		if !envNamePattern.MatchString(name) {
			return refusef(CodeInvalidArgument, "env name %q is not allowed: use letters, digits and '_', not starting with a digit", clip(name, 40))
		}
		if strings.ContainsRune(value, 0) {
			return refusef(CodeInvalidArgument, "the value of env %s holds a NUL byte", name)
		}
	}
	return nil
}

// bounded checks an optional number argument against [low, high] and
// returns it, or def when it was not given.
func bounded(field string, value *int, low, high, def int) (int, *Refusal) {
	if value == nil {
		return def, nil
	}
	if *value < low || *value > high {
		return 0, refusef(CodeInvalidArgument, "%s is %d; give a number from %d to %d", field, *value, low, high)
	}
	return *value, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
