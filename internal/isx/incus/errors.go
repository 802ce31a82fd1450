package incus

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/incusspawn/isx/internal/coded"
)

// The codes of the client's errors, for coded.CodeOf. A caller branches on
// them, or on the sentinels below, which match any error of their code.
const (
	// CodeNotFound: the instance, project, image, alias, file or operation
	// does not exist (HTTP 404).
	CodeNotFound = "incus_not_found"
	// CodeConflict: the object already exists (HTTP 409), or an If-Match
	// write lost a race because the object changed since it was read (HTTP
	// 412). Re-read and decide again.
	CodeConflict = "incus_conflict"
	// CodeFailed: Incus refused the request or its operation failed for
	// any other reason; the message is Incus's own.
	CodeFailed = "incus_failed"
	// CodeUnavailable: nothing answers on the Incus socket. Retrying
	// unchanged may succeed once the daemon is up.
	CodeUnavailable = "incus_unavailable"
	// CodeNoPermission: the socket is there but this user may not open it;
	// starting the daemon will not help.
	CodeNoPermission = "incus_no_permission"
	// CodeStdinTooLarge: Exec was given more stdin than MaxStdinBytes.
	CodeStdinTooLarge = "incus_stdin_too_large"
)

// Sentinels for errors.Is: each matches every error of its code (coded.Error
// compares codes), so an *Error or *OperationError matches by the status
// Incus answered with.
var (
	ErrNotFound      = sentinel(CodeNotFound, "incus: not found")
	ErrConflict      = sentinel(CodeConflict, "incus: conflict")
	ErrUnavailable   = sentinel(CodeUnavailable, "incus: daemon unavailable")
	ErrStdinTooLarge = sentinel(CodeStdinTooLarge, "incus: stdin too large")
)

func sentinel(code, message string) error { return &coded.Error{Code: code, Message: message} }

// Reported says whether err's code is one of this client's, that is
// whether the failure is Incus's rather than a domain's above it (which
// would have its own code first in the chain).
func Reported(err error) bool { return strings.HasPrefix(coded.CodeOf(err), "incus_") }

// Error is a failed API request: the HTTP status Incus answered with and its
// error message (Message).
type Error struct {
	coded.Base
	StatusCode int
}

// newError is the API's failure with the code its status and message mean.
func newError(status int, message string) *Error {
	return &Error{Base: coded.Base{Code: statusCode(status, message), Message: message}, StatusCode: status}
}

func (e *Error) Error() string {
	return fmt.Sprintf("incus: %s (HTTP %d)", e.Message, e.StatusCode)
}

// OperationError is a background operation that ended in failure or was
// cancelled; Message is the operation's own error text.
type OperationError struct {
	coded.Base
	ID          string
	Description string
	StatusCode  int
}

// NewOperationError is the failure of operation id (what it did, as Incus
// describes it) with the status and message Incus reported.
func NewOperationError(id, description string, status int, message string) *OperationError {
	return &OperationError{Base: coded.Base{Code: statusCode(status, message), Message: message},
		ID: id, Description: description, StatusCode: status}
}

func (e *OperationError) Error() string {
	what := e.Description
	if what == "" {
		what = "operation " + e.ID
	}
	return fmt.Sprintf("incus: %s failed: %s", what, e.Message)
}

func statusCode(status int, message string) string {
	switch {
	case status == http.StatusNotFound:
		return CodeNotFound
	case status == http.StatusConflict || status == http.StatusPreconditionFailed || existsMessage(message):
		return CodeConflict
	}
	return CodeFailed
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
// is not there, or a file that is no socket, is only the setting's. The
// hint is the setting's fix.
type unavailableError struct{ coded.Base }

const startDaemon = "start it with `systemctl start incus` or, without systemd, " +
	"`/usr/libexec/incus/incusd --group root &` (scripts/incus-up.sh does this)"

// unavailable is the socket's silence; wrongPath: nothing a daemon leaves
// behind looks like this.
func unavailable(socket string, setting socketSetting, wrongPath bool, cause error) *unavailableError {
	var message string
	switch {
	case setting.name != "" && wrongPath:
		message = fmt.Sprintf("%s%s points nowhere Incus listens (%v)", setting.name, socket, cause)
	case setting.name != "":
		message = fmt.Sprintf("%s%s points nowhere Incus listens (%v): either it names the wrong socket, "+
			"or the Incus daemon is not running there: "+startDaemon, setting.name, socket, cause)
	default:
		message = fmt.Sprintf("the Incus daemon is not running (nothing answers on %s: %v): "+startDaemon, socket, cause)
	}
	return &unavailableError{coded.Base{Code: CodeUnavailable, Message: message, Hint: setting.fix, Err: cause}}
}

// Error is the message alone: it says the cause already.
func (e *unavailableError) Error() string { return e.Message }

// permissionError is a socket we may not open.
type permissionError struct{ coded.Base }

func noPermission(socket string, cause error) *permissionError {
	return &permissionError{coded.Base{Code: CodeNoPermission, Err: cause, Message: fmt.Sprintf(
		"no permission to use the Incus socket %s (%v): run as root or join the incus-admin group", socket, cause)}}
}

// Error is the message alone: it says the cause already.
func (e *permissionError) Error() string { return e.Message }
