package server_test

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"strconv"
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

var tasksCapability = map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}

// benchEnv is actiond in process with the fake provider (answering at
// once), the agent worker and a LIVE server listing it and a cel tool.
func benchEnv(b *testing.B, d store.Dialect) (*at.Env, *modeltest.Server) {
	b.Helper()
	model := at.FakeModel(b, modelKey, func(x modeltest.Exchange) modeltest.Reply { return modeltest.Reply{Text: "done"} })
	env := at.New(b, d, at.Options{Models: at.Providers(model, modelKey)})
	env.PutPrincipal(server.LocalPrincipal, at.Everything())
	env.CreateAction(at.NewID(), at.AgentSpec{Name: "worker", Model: "worker", InputSchema: at.Object(map[string]any{"name": at.String()})}.Input())
	env.CreateAction(at.NewID(), at.CELTool("double", `event.data.n * 2`, at.Object(map[string]any{"n": at.Integer()}, "n")))
	env.CreateAction(at.NewID(), at.ServerSpec{Name: "bench", Intent: "NONE", Mode: "LIVE", CallsPerMinute: 100_000_000, Policies: at.Everything(),
		Tools: []map[string]any{at.Ref("worker"), at.Ref("double")}}.Input())
	return env, model
}

func benchClient(b *testing.B) *http.Client {
	transport := &http.Transport{MaxIdleConnsPerHost: 64}
	b.Cleanup(transport.CloseIdleConnections)
	return &http.Client{Transport: transport}
}

// BenchmarkTaskPolls measures tasks/get of a finished task — each poll
// admitted into its session, recorded with the status it returned and the
// TOOL use of the output, committed before its answer — beside the named
// baseline, a recorded tools/call of a cel tool, both from 16 clients on
// loopback. It reports polls/s.
func BenchmarkTaskPolls(b *testing.B) {
	for _, d := range []store.Dialect{store.SQLite, store.Postgres} {
		env, _ := benchEnv(b, d)
		token := env.Token(server.LocalPrincipal, "bench")
		client := benchClient(b)
		start := at.Request{Method: "tools/call", Capabilities: tasksCapability, Params: map[string]any{"name": "worker", "arguments": map[string]any{"name": "polled"}}}
		reply := env.Post("bench", token, start)
		taskID, _ := reply.Result()["taskId"].(string)
		if taskID == "" {
			b.Fatalf("start: %s", reply)
		}
		at.WaitFor(b, "the task to finish", time.Minute, func() bool { return env.Execution(taskID)["status"] == "SUCCEEDED" })
		requests := map[string]at.Request{
			"tasks-get":               {Method: "tasks/get", Capabilities: tasksCapability, Params: map[string]any{"taskId": taskID}},
			"baseline-cel-tools-call": {Method: "tools/call", Params: map[string]any{"name": "double", "arguments": map[string]any{"n": 21}}},
		}
		for _, name := range []string{"tasks-get", "baseline-cel-tools-call"} {
			b.Run(string(d)+"/"+name, func(b *testing.B) {
				body, header := requests[name].Body()
				b.SetParallelism(8) // 16 clients on 2 cores
				began := time.Now()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						reply, err := at.PostBody(context.Background(), client, env.Endpoint("bench"), token, body, header)
						if err != nil || reply.Status != 200 || reply.RPC["error"] != nil {
							b.Errorf("%s: %v %s", name, err, reply)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/time.Since(began).Seconds(), "polls/s")
			})
		}
	}
}

// BenchmarkTimeToFirstModelRequest measures, one call at a time, the time
// from sending a tools/call of a callable agent to the task's first request
// reaching the model's provider: the task recorded and queued, the answer
// sent, a worker woken, the task claimed, its agent read and its exchange
// begun. Beside it, the named baseline: the round trip of a recorded
// tools/call of a cel tool.
func BenchmarkTimeToFirstModelRequest(b *testing.B) {
	for _, d := range []store.Dialect{store.SQLite, store.Postgres} {
		env, model := benchEnv(b, d)
		client := benchClient(b)
		tokens := make([]string, 8)
		for i := range tokens {
			tokens[i] = env.Token(server.LocalPrincipal, fmt.Sprintf("bench-%d", i))
		}
		b.Run(string(d)+"/tools-call-to-first-model-request", func(b *testing.B) {
			body, header := at.Request{Method: "tools/call", Capabilities: tasksCapability, Params: map[string]any{"name": "worker", "arguments": map[string]any{"name": "first"}}}.Body()
			for i := 0; i < b.N; i++ {
				received := model.Received()
				reply, err := at.PostBody(context.Background(), client, env.Endpoint("bench"), tokens[i%len(tokens)], body, header)
				if err != nil || reply.Result()["taskId"] == nil {
					b.Fatalf("start: %v %s", err, reply)
				}
				<-received
			}
		})
		b.Run(string(d)+"/baseline-cel-tools-call", func(b *testing.B) {
			body, header := at.Request{Method: "tools/call", Params: map[string]any{"name": "double", "arguments": map[string]any{"n": 21}}}.Body()
			for i := 0; i < b.N; i++ {
				if reply, err := at.PostBody(context.Background(), client, env.Endpoint("bench"), tokens[0], body, header); err != nil || reply.Status != 200 {
					b.Fatalf("tools/call: %v %s", err, reply)
				}
			}
		})
	}
}

// drainTasks is how many tasks BenchmarkDrainQueuedTasks queues and drains:
// 1,000 by default, as the smoke run of every benchmark does; the target is
// measured with -drain-tasks=10000.
var drainTasks = flag.Int("drain-tasks", 1000, "how many queued tasks BenchmarkDrainQueuedTasks drains")

// drainWorkers is each process's --task-workers in BenchmarkDrainQueuedTasks.
var drainWorkers = flag.Int("drain-workers", 64, "how many tasks each process of BenchmarkDrainQueuedTasks runs at once")

// BenchmarkDrainQueuedTasks queues -drain-tasks tasks (1,000), then measures the time for
// actiond processes sharing one Postgres database to run them all: two
// processes, and beside them the named baseline, one. The tasks are queued
// while the provider holds every answer, so that the drain starts from a
// full queue (the workers' first claims, four per process, wait with them).
// Each op is one drain; run it with -benchtime=1x. It reports tasks/s.
func BenchmarkDrainQueuedTasks(b *testing.B) {
	for _, processes := range []int{2, 1} {
		b.Run(fmt.Sprintf("processes=%d", processes), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				elapsed := drain(b, processes, *drainTasks)
				b.ReportMetric(float64(*drainTasks)/elapsed.Seconds(), "tasks/s")
				b.ReportMetric(elapsed.Seconds(), "s/drain")
			}
		})
	}
}

func drain(b *testing.B, processes, tasks int) time.Duration {
	b.Helper()
	opts := storetest.Options(b, store.Postgres)
	at.CreateSchema(b, opts)
	release := make(chan struct{})
	var once sync.Once
	b.Cleanup(func() { once.Do(func() { close(release) }) })
	model := at.FakeModel(b, modelKey, func(x modeltest.Exchange) modeltest.Reply { return modeltest.Reply{Text: "done", Release: release} })
	config := modelConfig(b, model)
	var running []*at.Process
	public := "http://" + at.FreeAddr(b) // processes of one database serve one public URL
	for range processes {
		running = append(running, at.StartProcess(b, binary, opts, public, "--config", config, "--task-poll", "100ms", "--task-workers", strconv.Itoa(*drainWorkers)))
	}
	env := running[0].Env(store.Postgres)
	env.PutPrincipal(server.LocalPrincipal, at.Everything())
	agentID := at.NewID()
	env.CreateAction(agentID, at.AgentSpec{Name: "worker", Model: "worker", InputSchema: at.Object(map[string]any{"name": at.String()})}.Input())
	env.CreateAction(at.NewID(), at.ServerSpec{Name: "drain", Intent: "NONE", CallsPerMinute: 100_000_000, Policies: at.Everything(),
		Tools: []map[string]any{at.Ref("worker")}}.Input())
	// 32 unfinished tasks per user at most: users of 25 tasks each.
	users := max(1, tasks/25)
	client := benchClient(b)
	var wg sync.WaitGroup
	for user := range users {
		token := running[0].Token(server.LocalPrincipal, fmt.Sprintf("drainer-%d", user))
		wg.Add(1)
		go func() {
			defer wg.Done()
			body, header := at.Request{Method: "tools/call", Capabilities: tasksCapability, Params: map[string]any{"name": "worker", "arguments": map[string]any{"name": "queued"}}}.Body()
			for range tasks / users {
				if reply, err := at.PostBody(context.Background(), client, running[0].URL+"/mcp/v1/"+at.Account+"/drain", token, body, header); err != nil || reply.Result()["taskId"] == nil {
					b.Errorf("queue a task: %v %s", err, reply)
					return
				}
			}
		}()
	}
	wg.Wait()
	ctx := context.Background()
	counter, err := pgx.Connect(ctx, opts.PostgresDSN)
	if err != nil {
		b.Fatal(err)
	}
	defer counter.Close(ctx)
	count := "SELECT COUNT(*) FROM " + pgx.Identifier{opts.PostgresSchema, "tasks"}.Sanitize() + " WHERE status = 'SUCCEEDED'"
	b.StartTimer()
	began := time.Now()
	once.Do(func() { close(release) })
	at.WaitFor(b, "the queue to drain", 10*time.Minute, func() bool {
		var n int
		return counter.QueryRow(ctx, count).Scan(&n) == nil && n == tasks
	})
	elapsed := time.Since(began)
	if got := len(env.ExecutionsWhere(map[string]any{"actionId": agentID, "role": "task", "status": "SUCCEEDED"})); got != tasks {
		b.Errorf("%d tasks SUCCEEDED, want %d", got, tasks)
	}
	b.StopTimer()
	for _, p := range running {
		p.Kill()
	}
	return elapsed
}
