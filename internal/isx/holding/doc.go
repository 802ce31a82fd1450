// Package holding is the domain of MCP instances: which session holds an
// instance of the host user, and how holding changes hands. It reads the
// mcp stamps (every key is named in internal/isx/instance) into a View,
// tells a live session from a dead one (stdio sessions by pid and start
// time, coordinators by their instance's grant), makes, takes over, marks
// and releases instances with guarded writes (mark, re-read, act), counts
// instances and running tasks against mcp.yaml's limits across every
// session of the host user, keeps what a session last saw of its tasks,
// and sweeps orphans past their grace.
//
// It is what isx mcp's tools, the TUI and the CLI share of that domain;
// it says nothing of MCP itself: its errors are coded errors (Code*),
// which isx mcp turns into refusals.
package holding
