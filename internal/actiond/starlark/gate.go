package starlark

import (
	"context"
	"fmt"
)

// DefaultConcurrency is how many runs a Gate lets through at once when its
// size is not given: with the default budget, what Starlark can take of a
// process is 2 × 64 MiB, allocated in all, whatever the programs do.
const DefaultConcurrency = 2

// Gate bounds how many runs of a process go on at once: each may take its
// budget of memory, so the process's share is the gate's size times it. A
// run waits for a place until its context ends.
type Gate struct{ places chan struct{} }

// NewGate lets n runs through at once (DefaultConcurrency when n <= 0).
func NewGate(n int) *Gate {
	if n <= 0 {
		n = DefaultConcurrency
	}
	return &Gate{places: make(chan struct{}, n)}
}

// Size is how many runs the gate lets through at once.
func (g *Gate) Size() int { return cap(g.places) }

func (g *Gate) enter(ctx context.Context) (release func(), err error) {
	select {
	case g.places <- struct{}{}:
		return func() { <-g.places }, nil
	case <-ctx.Done():
		return nil, stopped(ctx, fmt.Sprintf("the script did not start: %d other scripts ran in this process until its deadline", cap(g.places)))
	}
}
