package proxy

import "sync"

// bell tells whoever waits that some count changed, so that a watcher of
// the activity (the TUI's mission control) hears of a change when it
// happens instead of asking again and again. Rings between two waits are
// folded into one.
type bell struct {
	mu sync.Mutex
	ch chan struct{}
}

func newBell() *bell { return &bell{ch: make(chan struct{})} }

// ring wakes every waiter.
func (b *bell) ring() {
	if b == nil {
		return
	}
	b.mu.Lock()
	close(b.ch)
	b.ch = make(chan struct{})
	b.mu.Unlock()
}

// wait is closed at the next ring.
func (b *bell) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ch
}
