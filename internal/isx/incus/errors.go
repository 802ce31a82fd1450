package incus

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Sentinels for errors.Is. Every error the client returns for an API failure
// is an *Error or *OperationError that matches these by status code.
var (
	// ErrNotFound: the instance, project, image, alias, file or operation does
	// not exist (HTTP 404).
	ErrNotFound = errors.New("incus: not found")
	// ErrConflict: the object already exists (HTTP 409), or an If-Match write
	// lost a race because the object changed since it was read (HTTP 412).
	// Re-read and decide again.
	ErrConflict = errors.New("incus: conflict")
	// ErrUnavailable: nothing answers on the Incus socket. Retrying unchanged
	// may succeed once the daemon is up.
	ErrUnavailable = errors.New("incus: daemon unavailable")
	// ErrStdinTooLarge: Exec was given more stdin than MaxStdinBytes.
	ErrStdinTooLarge = errors.New("incus: stdin too large")
)

// Error is a failed API request: the HTTP status Incus answered with and its
// error message.
type Error struct {
	StatusCode int
	Message    string
}

func (e *Error) Error() string {
	return fmt.Sprintf("incus: %s (HTTP %d)", e.Message, e.StatusCode)
}

// Is lets errors.Is(err, ErrNotFound) and errors.Is(err, ErrConflict) match
// by status code.
func (e *Error) Is(target error) bool { return statusIs(e.StatusCode, e.Message, target) }

// OperationError is a background operation that ended in failure or was
// cancelled; Message is the operation's own error text.
type OperationError struct {
	ID          string
	Description string
	StatusCode  int
	Message     string
}

func (e *OperationError) Error() string {
	what := e.Description
	if what == "" {
		what = "operation " + e.ID
	}
	return fmt.Sprintf("incus: %s failed: %s", what, e.Message)
}

func (e *OperationError) Is(target error) bool { return statusIs(e.StatusCode, e.Message, target) }

func statusIs(status int, message string, target error) bool {
	switch target {
	case ErrNotFound:
		return status == http.StatusNotFound
	case ErrConflict:
		return status == http.StatusConflict || status == http.StatusPreconditionFailed || existsMessage(message)
	}
	return false
}

// existsMessage recognises "already exists" failures that Incus 6.0 reports
// without a 409: creating a project or instance whose name is taken fails
// its database insert (HTTP 500, or a failed operation).
func existsMessage(message string) bool {
	return strings.Contains(message, "UNIQUE constraint failed") || strings.Contains(message, "already exists")
}

// unavailableError says why the socket did not answer and how to fix it.
// A socket a setting named that is not there is first the setting's
// fault, and the error names the setting; but a daemon stopped cleanly
// removes its socket too, so where the socket's directory exists the
// error also says how to start the daemon. A socket in a directory that
// is not there, or a file that is no socket, is only the setting's.
type unavailableError struct {
	socket  string
	setting socketSetting
	// wrongPath: nothing a daemon leaves behind looks like this.
	wrongPath bool
	cause     error
}

const startDaemon = "start it with `systemctl start incus` or, without systemd, " +
	"`/usr/libexec/incus/incusd --group root &` (scripts/incus-up.sh does this)"

func (e *unavailableError) Error() string {
	switch {
	case e.setting.name != "" && e.wrongPath:
		return fmt.Sprintf("%s%s points nowhere Incus listens (%v)", e.setting.name, e.socket, e.cause)
	case e.setting.name != "":
		return fmt.Sprintf("%s%s points nowhere Incus listens (%v): either it names the wrong socket, "+
			"or the Incus daemon is not running there: "+startDaemon, e.setting.name, e.socket, e.cause)
	}
	return fmt.Sprintf("the Incus daemon is not running (nothing answers on %s: %v): "+startDaemon, e.socket, e.cause)
}

// ErrorHint is the setting's fix, for coded.HintOf.
func (e *unavailableError) ErrorHint() string { return e.setting.fix }

func (e *unavailableError) Is(target error) bool { return target == ErrUnavailable }
func (e *unavailableError) Unwrap() error        { return e.cause }

// permissionError is a socket we may not open: starting the daemon will not
// help, so it is not ErrUnavailable.
type permissionError struct {
	socket string
	cause  error
}

func (e *permissionError) Error() string {
	return fmt.Sprintf("no permission to use the Incus socket %s (%v): run as root or join the incus-admin group",
		e.socket, e.cause)
}

func (e *permissionError) Unwrap() error { return e.cause }
