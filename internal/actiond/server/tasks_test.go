package server_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/modeltest"
	"github.com/incusspawn/isx/internal/actiond/server"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
)

const modelKey = "process-model-key"

// modelConfig writes actiond's configuration naming the fake provider.
func modelConfig(t testing.TB, model *modeltest.Server) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "actiond.yaml")
	config := fmt.Sprintf("models:\n  - name: anthropic\n    api: anthropic\n    baseURL: %s\n    apiKey: %s\n", model.URL, modelKey)
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startWorkers runs actiond with the fake provider, a short liveness and
// a quick poll, so that recovery happens within a test's patience.
func startWorkers(t testing.TB, opts store.Options, config, public string) *at.Process {
	t.Helper()
	return at.StartProcess(t, binary, opts, public, "--config", config, "--liveness", "2s", "--task-poll", "100ms")
}

func startTask(t *testing.T, env *at.Env, token, name string) string {
	t.Helper()
	reply := env.Post("workers", token, at.Request{Method: "tools/call", Capabilities: map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}},
		Params: map[string]any{"name": "worker", "arguments": map[string]any{"name": name}}})
	id, _ := reply.Result()["taskId"].(string)
	if id == "" {
		t.Fatalf("start %s: %s", name, reply)
	}
	return id
}

func defineWorkers(env *at.Env) string {
	agentID := at.NewID()
	env.CreateAction(agentID, at.AgentSpec{Name: "worker", Model: "worker", InputSchema: at.Object(map[string]any{"name": at.String()}, "name")}.Input())
	env.CreateAction(at.NewID(), at.ServerSpec{Name: "workers", Intent: "NONE", Policies: at.Everything(), Tools: []map[string]any{at.Ref("worker")}}.Input())
	return agentID
}

// ACT-153 and the recovery of issue 12: the process running a task's agent
// is killed with SIGKILL mid-run; the other process sharing the Postgres
// database notices its heartbeat stop, schedules a retry
// (RETRY_SCHEDULED), runs the agent again, and the task SUCCEEDS once.
func TestKilledWorkersTaskIsRecovered(t *testing.T) {
	opts := storetest.Options(t, store.Postgres)
	at.CreateSchema(t, opts)
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	model := at.FakeModel(t, modelKey, func(x modeltest.Exchange) modeltest.Reply {
		return modeltest.Reply{Text: "recovered " + x.Input()["name"].(string), Release: release}
	})
	config := modelConfig(t, model)
	// Processes sharing a database serve one public URL, so that a token
	// for one is a token for the other (actiond token signs as the URL the
	// database records).
	public := "http://" + at.FreeAddr(t)
	first := startWorkers(t, opts, config, public)
	env := first.Env(store.Postgres)
	env.PutPrincipal(server.LocalPrincipal, at.Everything())
	defineWorkers(env)
	taskID := startTask(t, env, first.Token(server.LocalPrincipal, "alice"), "killed-mid-run")
	at.WaitFor(t, "the first process's worker to ask the model", time.Minute, func() bool { return len(model.Exchanges()) == 1 })
	if e := env.Execution(taskID); e["status"] != "RUNNING" {
		t.Fatalf("the task is %v", e["status"])
	}
	second := startWorkers(t, opts, config, public)
	first.Kill()
	env = second.Env(store.Postgres)
	at.WaitFor(t, "the second process to run the agent again", time.Minute, func() bool { return len(model.Exchanges()) == 2 })
	once.Do(func() { close(release) })
	at.WaitFor(t, "the task to succeed", time.Minute, func() bool { return env.Execution(taskID)["status"] == "SUCCEEDED" })
	e := env.Execution(taskID)
	calls := e["calls"].([]any)
	if e["output"] != "recovered killed-mid-run" || len(calls) != 1 || at.Dig(calls[0], "status") != "SUCCEEDED" || len(model.Exchanges()) != 2 {
		t.Errorf("the recovered task: %s; %d exchanges", at.AsJSON(e), len(model.Exchanges()))
	}
	if running := env.ExecutionsWhere(map[string]any{"status": "RUNNING"}); len(running) != 0 {
		t.Errorf("still RUNNING: %s", at.AsJSON(running))
	}
}

// Tasks drained by two processes sharing Postgres, one of them killed with
// SIGKILL while each of its four workers waits on the model: every task
// SUCCEEDS exactly once with one successful exchange, none is lost, and
// exactly the four the killed process was running needed another attempt.
func TestTasksRunOnceAcrossProcesses(t *testing.T) {
	opts := storetest.Options(t, store.Postgres)
	at.CreateSchema(t, opts)
	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	t.Cleanup(open)
	model := at.FakeModel(t, modelKey, func(x modeltest.Exchange) modeltest.Reply {
		return modeltest.Reply{Text: "ran " + x.Input()["name"].(string), Release: release}
	})
	config := modelConfig(t, model)
	public := "http://" + at.FreeAddr(t) // one public URL for both, as above
	a := startWorkers(t, opts, config, public)
	env := a.Env(store.Postgres)
	env.PutPrincipal(server.LocalPrincipal, at.Everything())
	agentID := defineWorkers(env)
	b := startWorkers(t, opts, config, public)
	const tasks = 60
	// Across users, so that the limits of 32 per user and session do not bind.
	tokens := map[int]string{}
	for i := range tasks {
		user := i % 4
		if tokens[user] == "" {
			tokens[user] = a.Token(server.LocalPrincipal, fmt.Sprintf("user-%d", user))
		}
		startTask(t, env, tokens[user], fmt.Sprintf("task-%02d", i))
	}
	// Every exchange is held: eight in flight are both processes' four
	// workers each.
	at.WaitFor(t, "eight exchanges in flight", time.Minute, func() bool { return len(model.Exchanges()) == 8 })
	a.Kill()
	open()
	envB := b.Env(store.Postgres)
	at.WaitFor(t, "every task to finish", 2*time.Minute, func() bool {
		return len(envB.ExecutionsWhere(map[string]any{"actionId": agentID, "role": "task", "status": "SUCCEEDED"})) == tasks
	})
	seen := map[string]int{}
	for _, x := range model.Exchanges() {
		seen[x.Input()["name"].(string)]++
	}
	again := 0
	for i := range tasks {
		name := fmt.Sprintf("task-%02d", i)
		switch seen[name] {
		case 1:
		case 2:
			again++ // its first attempt died with the killed process
		default:
			t.Errorf("%s was asked of the model %d times", name, seen[name])
		}
	}
	if again != 4 {
		t.Errorf("%d tasks needed a second attempt, want the killed process's 4", again)
	}
	for _, e := range envB.ExecutionsWhere(map[string]any{"actionId": agentID, "role": "task"}) {
		succeeded := 0
		for _, c := range e["calls"].([]any) {
			if at.Dig(c, "status") == "SUCCEEDED" {
				succeeded++
			}
		}
		if e["status"] != "SUCCEEDED" || succeeded != 1 || e["output"] != "ran "+at.Dig(e, "input", "name").(string) {
			t.Errorf("task %v: %v with %d successful exchanges", e["id"], e["status"], succeeded)
		}
	}
	if running := envB.ExecutionsWhere(map[string]any{"status": "RUNNING"}); len(running) != 0 {
		t.Errorf("still RUNNING: %d", len(running))
	}
}

// defineLoad is the crash test's LIVE stamping server, and a token.
func defineLoad(t *testing.T, p *at.Process, env *at.Env) (serverID, token string) {
	t.Helper()
	env.CreateAction(at.NewID(), at.StarlarkTool("stamp", stampSource, at.Object(map[string]any{"k": at.String()}, "k"), []map[string]any{at.Ref("graphql")}))
	serverID = at.NewID()
	env.CreateAction(serverID, at.ServerSpec{Name: "crash", Intent: "NONE", Mode: "LIVE", CallsPerMinute: 1_000_000,
		Policies: at.Everything(), Tools: []map[string]any{at.Ref("stamp")}}.Input())
	return serverID, p.Token(server.LocalPrincipal, "loader")
}

// ACT-103, ACT-105, ACT-118. Found tried as a new user would: with actiond's Postgres connections cut
// every 200 ms under load, clients rightly got errors and no content, but
// the records of 197 of those requests stayed RUNNING for good. Now a
// request answered with an error it could not record is recorded once the
// database takes the write: none stays RUNNING, and every request answered
// with an error is FAILED.
func TestNothingStaysRunningWhenConnectionsAreCut(t *testing.T) {
	opts := storetest.Options(t, store.Postgres)
	at.CreateSchema(t, opts)
	application := "actiond-cut-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	opts.PostgresDSN = withParam(opts.PostgresDSN, "application_name", application)
	p := at.StartProcess(t, binary, opts, "", "--liveness", "2s")
	env := p.Env(store.Postgres)
	serverID, token := defineLoad(t, p, env)
	l := startLoad(p.URL, "crash", token, 16)
	at.WaitFor(t, "the load to run", time.Minute, func() bool { return l.answered() > 200 })

	ctx := context.Background()
	killer, err := pgx.Connect(ctx, storetest.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer killer.Close(ctx)
	cut := 0
	ticker := time.NewTicker(200 * time.Millisecond)
	for range 20 {
		<-ticker.C
		tag, err := killer.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", application)
		if err != nil {
			t.Fatal(err)
		}
		cut += int(tag.RowsAffected())
	}
	ticker.Stop()
	l.Stop()
	at.WaitFor(t, "no request to stay RUNNING", time.Minute, func() bool {
		return len(env.ExecutionsWhere(map[string]any{"actionId": serverID, "status": "RUNNING"})) == 0
	})
	v := l.check(t, env, serverID)
	if cut == 0 || v.errors == 0 {
		t.Errorf("%d connections cut, %d requests answered with an error: the test did not cut anything that mattered", cut, v.errors)
	}
	t.Logf("%d connections cut: %d requests sent, %d answered (%d with an error); recorded %d SUCCEEDED, %d FAILED, %d refusals",
		cut, v.sent, v.answered, v.errors, v.succeeded, v.failed, v.refusals)
}

// ACT-103, ACT-105: the database restarted under load: requests answered while it was down
// are recorded FAILED once it is back; none stays RUNNING.
func TestNothingStaysRunningWhenTheDatabaseRestarts(t *testing.T) {
	pg := at.PrivatePostgres(t)
	opts := store.Options{PostgresDSN: pg.DSN, PostgresSchema: "restart"}
	at.CreateSchema(t, opts)
	p := at.StartProcess(t, binary, opts, "", "--liveness", "2s")
	env := p.Env(store.Postgres)
	serverID, token := defineLoad(t, p, env)
	l := startLoad(p.URL, "crash", token, 16)
	at.WaitFor(t, "the load to run", time.Minute, func() bool { return l.answered() > 200 })
	pg.Stop()
	before := l.answered()
	at.WaitFor(t, "requests to be answered while the database is down", time.Minute, func() bool { return l.answered() > before+50 })
	pg.Start()
	after := l.answered()
	at.WaitFor(t, "the load to go on", time.Minute, func() bool { return l.answered() > after+200 })
	l.Stop()
	at.WaitFor(t, "no request to stay RUNNING", time.Minute, func() bool {
		return len(env.ExecutionsWhere(map[string]any{"actionId": serverID, "status": "RUNNING"})) == 0
	})
	v := l.check(t, env, serverID)
	if v.errors == 0 {
		t.Error("no request was answered with an error while the database was down")
	}
	t.Logf("restart: %d requests sent, %d answered (%d with an error); recorded %d SUCCEEDED, %d FAILED, %d refusals",
		v.sent, v.answered, v.errors, v.succeeded, v.failed, v.refusals)
}

func withParam(dsn, key, value string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}
