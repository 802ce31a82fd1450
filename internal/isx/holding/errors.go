package holding

import (
	"github.com/incusspawn/isx/internal/coded"
)

// Codes of this package's failures, in the words isx mcp's refusals use
// (_meta["dev.incusspawn/error"].code).
const (
	// CodeInvalidArgument: an idempotency key repeated for another
	// instance than the one it made a task in.
	CodeInvalidArgument = "invalid_argument"
	// CodeNotFound: no MCP instance of that name for this host user.
	CodeNotFound = "not_found"
	// CodeNotHeld: the session does not hold the instance: another live
	// session does, or it is an orphan.
	CodeNotHeld = "not_held"
	// CodeWrongState: the instance is not in a state that allows it (not
	// running, not finished making, held by a live session).
	CodeWrongState = "wrong_state"
	// CodeBusy: something else is working on the same instance right now.
	CodeBusy = "busy"
	// CodeLimit: mcp.yaml's max-instances or max-concurrent-tasks is
	// reached for the host user.
	CodeLimit = "limit"
	// CodeUnavailable: the instance cannot answer now.
	CodeUnavailable = "unavailable"
	// CodeRefused: another host user's instance, or an instance without
	// the coordinator grant.
	CodeRefused = "refused"
	// CodeInternal: the count of instances being made cannot be kept.
	CodeInternal = "internal"
)

// Failures are coded errors with the codes above, about the instance
// named (About "instance"); a failure Incus reported keeps no code of its
// own and is the cause.

func refuse(code, name, format string, args ...any) *coded.Error {
	return coded.New(code, format, args...).On("instance", name)
}

func refuseWith(code, name string, err error, format string, args ...any) *coded.Error {
	return coded.Wrap(code, err, format, args...).On("instance", name)
}

// about says which instance a failure Incus reported concerns.
func about(name string, err error) error {
	if err == nil {
		return nil
	}
	return coded.Wrap("", err, "").On("instance", name)
}
