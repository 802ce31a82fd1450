package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
)

// answeringStdio stands between isx mcp's stdin and stdout and the MCP
// SDK, so that input that ends (`isx mcp < requests.jsonl`, a client that
// closes its end after its last request) still gets every answer: the SDK
// cancels whatever is in flight the moment its reader sees EOF, so the
// end of the input is held back from it until every request read before
// it has been answered.
//
// It works on the bytes, not on the SDK's connection, because the SDK
// tells its own stdio connection the session's protocol version through
// an unexported method (batches are refused from 2025-06-18 on), which a
// wrapped connection would hide.
type answeringStdio struct {
	in  io.Reader
	out io.Writer

	reader *io.PipeReader // what the SDK reads
	writer *io.PipeWriter

	mu sync.Mutex
	// pending are the ids of the client's requests not yet answered;
	// outgoing the ids of the server's own requests the client has not
	// answered, which nobody will once the input ended.
	pending  map[string]bool
	outgoing map[string]json.RawMessage
	partial  []byte // output not yet ending a line
	changed  chan struct{}
	stopped  chan struct{}
	stopOnce sync.Once
}

func newAnsweringStdio(in io.Reader, out io.Writer) *answeringStdio {
	reader, writer := io.Pipe()
	s := &answeringStdio{in: in, out: out, reader: reader, writer: writer,
		pending: map[string]bool{}, outgoing: map[string]json.RawMessage{},
		changed: make(chan struct{}, 1), stopped: make(chan struct{})}
	go s.forward()
	return s
}

// Reader is the input as the SDK is to read it.
func (s *answeringStdio) Reader() io.Reader { return s.reader }

// Stop ends the forwarding once the server is done, answered or not.
func (s *answeringStdio) Stop() {
	s.stopOnce.Do(func() {
		close(s.stopped)
		s.reader.Close()
	})
}

// forward passes the input on message by message, noting the requests,
// and at its end waits for their answers before passing the end on.
func (s *answeringStdio) forward() {
	dec := json.NewDecoder(s.in)
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				// Not JSON: the SDK says what is wrong with it.
				_, _ = io.Copy(s.writer, io.MultiReader(dec.Buffered(), s.in))
			}
			break
		}
		s.received(raw)
		if _, err := s.writer.Write(append(raw, '\n')); err != nil {
			return // the server stopped reading
		}
	}
	s.awaitAnswers()
	s.writer.Close()
}

// awaitAnswers returns once every request read has been answered, or the
// server stopped. The server's own requests get an error in the client's
// stead, since the client can no longer answer them.
func (s *answeringStdio) awaitAnswers() {
	for {
		s.mu.Lock()
		calls := make([]json.RawMessage, 0, len(s.outgoing))
		for key, id := range s.outgoing {
			calls = append(calls, id)
			delete(s.outgoing, key)
		}
		waiting := len(s.pending)
		s.mu.Unlock()
		for _, id := range calls {
			answer := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"the client's input ended, so nothing can answer this request"}}`+"\n", id)
			if _, err := io.WriteString(s.writer, answer); err != nil {
				return
			}
		}
		if waiting == 0 {
			return
		}
		select {
		case <-s.changed:
		case <-s.stopped:
			return
		}
	}
}

// Write is the server's output: passed on whole, then read for answers.
func (s *answeringStdio) Write(p []byte) (int, error) {
	n, err := s.out.Write(p)
	s.mu.Lock()
	s.partial = append(s.partial, p[:n]...)
	for {
		line, rest, found := bytes.Cut(s.partial, []byte("\n"))
		if !found {
			break
		}
		s.sent(line)
		s.partial = rest
	}
	s.partial = bytes.Clone(s.partial)
	s.mu.Unlock()
	s.wake()
	return n, err
}

func (s *answeringStdio) wake() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// message is what of a JSON-RPC message tells a request, a response and a
// cancellation apart.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		RequestID json.RawMessage `json:"requestId"`
	} `json:"params"`
}

// messages reads one message or a batch; what is not JSON-RPC reads as
// none.
func messages(raw []byte) []message {
	var batch []message
	if err := json.Unmarshal(raw, &batch); err == nil {
		return batch
	}
	var one message
	if err := json.Unmarshal(raw, &one); err != nil {
		return nil
	}
	return []message{one}
}

// received notes what the client sent: its requests, its answers to the
// server's, and its cancellations (after which no answer is owed).
func (s *answeringStdio) received(raw json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range messages(raw) {
		key, hasID := idKey(m.ID)
		switch {
		case m.Method == "notifications/cancelled":
			if cancelled, ok := idKey(m.Params.RequestID); ok {
				delete(s.pending, cancelled)
			}
		case m.Method != "" && hasID:
			s.pending[key] = true
		case m.Method == "" && hasID:
			delete(s.outgoing, key)
		}
	}
}

// sent notes what the server wrote: answers, and requests of its own.
// The caller holds mu.
func (s *answeringStdio) sent(line []byte) {
	for _, m := range messages(line) {
		key, hasID := idKey(m.ID)
		switch {
		case !hasID:
		case m.Method == "":
			delete(s.pending, key)
		default:
			s.outgoing[key] = bytes.Clone(m.ID)
		}
	}
}

// idKey is an id as both ends agree on it: the SDK reads a number as a
// float64 and writes it back as an integer, so 1 and 1.0 are one id.
func idKey(raw json.RawMessage) (string, bool) {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	switch id := v.(type) {
	case string:
		return "s:" + id, true
	case float64:
		return "n:" + strconv.FormatFloat(id, 'g', -1, 64), true
	}
	return "", false
}
