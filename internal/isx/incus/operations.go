package incus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// Operation status codes Incus uses for background operations.
const (
	OperationSuccess   = 200
	OperationFailure   = 400
	OperationCancelled = 401
)

// waitSlice is how long one wait request may block in the daemon; longer
// waits repeat it, so a dropped connection never hangs a caller for long.
const waitSlice = 30 * time.Second

// Operation is a background task of the daemon (creating, starting,
// copying, exec, image import …).
type Operation struct {
	ID          string              `json:"id"`
	Class       string              `json:"class"`
	Description string              `json:"description"`
	Status      string              `json:"status"`
	StatusCode  int                 `json:"status_code"`
	Resources   map[string][]string `json:"resources"`
	Metadata    json.RawMessage     `json:"metadata"`
	MayCancel   bool                `json:"may_cancel"`
	Err         string              `json:"err"`
	CreatedAt   time.Time           `json:"created_at"`
	UpdatedAt   time.Time           `json:"updated_at"`
}

// Done reports whether the operation has finished, in any way.
func (op *Operation) Done() bool {
	return op.StatusCode == OperationSuccess || op.StatusCode == OperationFailure || op.StatusCode == OperationCancelled
}

// failure is the operation's outcome as an error (nil on success).
func (op *Operation) failure() error {
	switch op.StatusCode {
	case OperationFailure, OperationCancelled:
		return NewOperationError(op.ID, op.Description, op.StatusCode, op.Err)
	}
	return nil
}

// WaitOperation blocks until the operation finishes or ctx ends. A failed or
// cancelled operation is returned together with an *OperationError.
func (c *Client) WaitOperation(ctx context.Context, id string) (*Operation, error) {
	for {
		op, err := c.waitOnce(ctx, id, waitSlice)
		if err != nil {
			return op, err
		}
		if op.Done() {
			return op, op.failure()
		}
		if err := ctx.Err(); err != nil {
			return op, err
		}
	}
}

// waitOnce asks the daemon to hold the request until the operation finishes
// or timeout passes, and returns its state either way.
func (c *Client) waitOnce(ctx context.Context, id string, timeout time.Duration) (*Operation, error) {
	seconds := int(timeout / time.Second)
	if deadline, ok := ctx.Deadline(); ok {
		if left := int(time.Until(deadline)/time.Second) + 1; left < seconds {
			seconds = left
		}
	}
	seconds = max(seconds, 1)
	r := request{
		method: "GET",
		path:   apiPath("operations", id, "wait"),
		query:  url.Values{"timeout": {strconv.Itoa(seconds)}},
	}
	var op Operation
	_, err := c.get(ctx, r, &op)
	if err != nil {
		// When the operation itself failed, the daemon answers the wait
		// with an error envelope carrying the operation's error.
		var apiErr *Error
		if errors.As(err, &apiErr) && !(apiErr.StatusCode == 404 && apiErr.Message == "Operation not found") {
			return nil, NewOperationError(id, "", apiErr.StatusCode, apiErr.Message)
		}
		return nil, fmt.Errorf("incus: waiting for operation %s: %w", id, err)
	}
	return &op, nil
}

// CancelOperation asks the daemon to cancel an operation that allows it.
func (c *Client) CancelOperation(ctx context.Context, id string) error {
	_, err := c.get(ctx, request{method: "DELETE", path: apiPath("operations", id)}, nil)
	return err
}
