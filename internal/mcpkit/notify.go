package mcpkit

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Notifier wraps a transport and keeps the connection the SDK makes through
// it, so that a server can send notifications the SDK has no sender for
// (such as notifications/isx/task_changed). The connection itself is handed
// to the SDK unwrapped, so the SDK's own handling of it is unchanged.
type Notifier struct {
	inner mcp.Transport
	mu    sync.Mutex
	conn  mcp.Connection
}

// NewNotifier wraps t; connect the SDK through the Notifier.
func NewNotifier(t mcp.Transport) *Notifier { return &Notifier{inner: t} }

// Connect implements mcp.Transport.
func (n *Notifier) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := n.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	n.conn = conn
	n.mu.Unlock()
	return conn, nil
}

// ErrNotConnected is returned by Notify before the SDK connected.
var ErrNotConnected = errors.New("mcpkit: no connection to notify on yet")

// Notify sends one notification: a JSON-RPC request without an id.
func (n *Notifier) Notify(ctx context.Context, method string, params any) error {
	n.mu.Lock()
	conn := n.conn
	n.mu.Unlock()
	if conn == nil {
		return ErrNotConnected
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return err
	}
	return conn.Write(ctx, &jsonrpc.Request{Method: method, Params: raw})
}

// Listener wraps a client's transport and hands notifications of the given
// methods to a function instead of the SDK, whose client has no handler for
// notifications it does not know. Every other message passes unchanged.
type Listener struct {
	inner   mcp.Transport
	methods map[string]func(params json.RawMessage)
}

// NewListener wraps t; handle maps a method to what receives its params.
// handle's functions run on the connection's read loop and must not block.
func NewListener(t mcp.Transport, handle map[string]func(params json.RawMessage)) *Listener {
	return &Listener{inner: t, methods: handle}
}

// Connect implements mcp.Transport.
func (l *Listener) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := l.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &listeningConn{Connection: conn, methods: l.methods}, nil
}

type listeningConn struct {
	mcp.Connection
	methods map[string]func(params json.RawMessage)
}

func (c *listeningConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			return nil, err
		}
		req, ok := msg.(*jsonrpc.Request)
		if !ok || req.ID.IsValid() {
			return msg, nil
		}
		handle, ok := c.methods[req.Method]
		if !ok {
			return msg, nil
		}
		handle(req.Params)
	}
}
