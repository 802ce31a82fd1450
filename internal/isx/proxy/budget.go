package proxy

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
)

// The memory the proxy holds for model calls (a body sent without a
// length, which must be read whole before it goes upstream; the part of
// an answer its usage is read from) comes out of two budgets: the
// instance's own and the whole proxy's. Everything else streams through.
// One instance over its budget is refused alone; the proxy's budget is
// what keeps the sum of the instances' from taking the host down.
const (
	// DefaultInstanceMemory is an instance's budget: four model calls of
	// the largest size at once.
	DefaultInstanceMemory = 4 * DefaultMaxModelRequest
	// DefaultProxyMemory is the whole proxy's.
	DefaultProxyMemory = 512 << 20
	// memoryStep is how much a model call takes at a time; every call in
	// flight holds one at least.
	memoryStep = 64 << 10
)

// budget is bytes that may be held at once.
type budget struct {
	limit int64
	used  atomic.Int64
}

func newBudget(limit int64) *budget { return &budget{limit: limit} }

func (b *budget) take(n int64) bool {
	for {
		used := b.used.Load()
		if used+n > b.limit {
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

func (b *budget) give(n int64) { b.used.Add(-n) }

// hold is what one model call holds of both budgets: taken a step at a
// time as its buffers grow, all given back when it ends.
type hold struct {
	s *Server
	e *entry

	mu       sync.Mutex
	reserved int64
	used     int64
	// refused says which budget refused, for the answer and the log.
	refused string
}

// Who refused memory to a call.
const (
	refusedByInstance = "instance"
	refusedByProxy    = "proxy"
)

// admit takes the first step of a model call, or says it cannot.
func (s *Server) admit(e *entry) (*hold, bool) {
	h := &hold{s: s, e: e}
	return h, h.use(0)
}

// use counts n more bytes held, taking steps from both budgets as needed.
func (h *hold) use(n int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if need := h.used + n - h.reserved; need > 0 || h.reserved == 0 {
		more := max(memoryStep, (need+memoryStep-1)/memoryStep*memoryStep)
		if !h.e.memory.take(more) {
			h.refused = refusedByInstance
			return false
		}
		if !h.s.memory.take(more) {
			h.e.memory.give(more)
			h.refused = refusedByProxy
			return false
		}
		h.reserved += more
	}
	h.used += n
	return true
}

// free counts n bytes no longer held; the steps stay with the call.
func (h *hold) free(n int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.used = max(0, h.used-n)
}

// release gives every step back.
func (h *hold) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.e.memory.give(h.reserved)
	h.s.memory.give(h.reserved)
	h.reserved, h.used = 0, 0
}

// refuse answers 503 saying which budget is spent.
func (h *hold) refuse(w http.ResponseWriter) {
	h.mu.Lock()
	by := h.refused
	h.mu.Unlock()
	why := fmt.Sprintf("%s's model calls hold all the memory the host proxy gives one instance (%d bytes); try again once its other calls end", h.e.name, h.e.memory.limit)
	if by == refusedByProxy {
		why = fmt.Sprintf("the host proxy holds all the memory it gives model calls of every instance (%d bytes); try again shortly", h.s.memory.limit)
	}
	h.s.opts.Log.Warn("refused a model call over the memory budget", "instance", h.e.name, "budget", by)
	writeError(w, http.StatusServiceUnavailable, "overloaded_error", "isx host proxy: "+why)
}
