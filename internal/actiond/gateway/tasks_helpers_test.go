package gateway_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/modeltest"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// modelKey is the key the fake provider requires: the one actiond's
// configuration gives it, never a definition.
const modelKey = "provider-key-from-configuration"

// taskWait bounds how long a test waits for a task to move.
const taskWait = 30 * time.Second

// stampSource writes the KV row tasks/<k> and answers {"k": k}.
const stampSource = `
def run(event):
    k = event["data"]["k"]
    graphql("mutation($k: String!) { kv { put(namespace: \"tasks\", key: $k, value: {stamped: true}) { key } } }", variables = {"k": k})
    return {"k": k}
`

// gates hands out channels a script holds an answer on until the test
// opens them; an opened gate stays open, and every gate still shut opens at
// the end of the test.
type gates struct {
	mu     sync.Mutex
	all    map[string]chan struct{}
	opened map[string]bool
}

func newGates(t *testing.T) *gates {
	g := &gates{all: map[string]chan struct{}{}, opened: map[string]bool{}}
	t.Cleanup(func() {
		g.mu.Lock()
		names := make([]string, 0, len(g.all))
		for name := range g.all {
			names = append(names, name)
		}
		g.mu.Unlock()
		for _, name := range names {
			g.open(name)
		}
	})
	return g
}

func (g *gates) gate(name string) <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := g.all[name]
	if !ok {
		c = make(chan struct{})
		g.all[name] = c
	}
	return c
}

func (g *gates) open(name string) {
	g.gate(name)
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.opened[name] {
		g.opened[name] = true
		close(g.all[name])
	}
}

// taskEnv is actiond with the fake provider configured, the principal
// allowed everything, and the stamp tool defined.
func taskEnv(t *testing.T, d store.Dialect, opts at.Options, script modeltest.Script) (*at.Env, *modeltest.Server) {
	t.Helper()
	model := at.FakeModel(t, modelKey, script)
	opts.Models = at.Providers(model, modelKey)
	env := at.New(t, d, opts)
	env.PutPrincipal(principal, at.Everything())
	env.CreateAction(at.NewID(), at.StarlarkTool("stamp", stampSource, at.Object(map[string]any{"k": at.String()}, "k"), []map[string]any{at.Ref("graphql")}))
	return env, model
}

// eachTaskDialect runs fn on SQLite and on Postgres, in parallel.
func eachTaskDialect(t *testing.T, fn func(t *testing.T, d store.Dialect)) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		t.Parallel()
		fn(t, d)
	})
}

// withTasks are the client capabilities of a request declaring the
// extension, for raw requests.
var withTasks = map[string]any{"extensions": map[string]any{mcpkit.TasksExtension: map[string]any{}}}

// exchangesWith counts the exchanges whose agent input has key = value.
func exchangesWith(model *modeltest.Server, key, value string) int {
	n := 0
	for _, x := range model.Exchanges() {
		if x.Input()[key] == value {
			n++
		}
	}
	return n
}

// waitExecution waits until the execution's status is want.
func waitExecution(t *testing.T, env *at.Env, id, want string) map[string]any {
	t.Helper()
	var e map[string]any
	at.WaitFor(t, fmt.Sprintf("execution %s to be %s", id, want), taskWait, func() bool {
		e = env.Execution(id)
		return e != nil && e["status"] == want
	})
	return e
}

// rawKeys are the top-level keys of a JSON object.
func rawKeys(raw json.RawMessage) map[string]bool {
	var m map[string]json.RawMessage
	json.Unmarshal(raw, &m)
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}

// tasksOf lists the task executions a request started.
func tasksOf(env *at.Env, agentID string) []map[string]any {
	return env.ExecutionsWhere(map[string]any{"actionId": agentID, "role": "task"})
}

func jsonUnmarshal(raw json.RawMessage, v any) {
	json.Unmarshal(raw, v)
}
