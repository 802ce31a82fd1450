package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/incusspawn/isx/internal/actiond/agent"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
	"github.com/incusspawn/isx/internal/clock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const account = "000000000000"

var start = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

type sequence struct {
	mu sync.Mutex
	n  int
}

func (s *sequence) New() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	return fmt.Sprintf("id-%04d", s.n)
}

// succeeding is the seam standing in for the agent: every attempt succeeds
// at once. The agent itself runs in the gateway's and server's tests.
type succeeding struct {
	mu   sync.Mutex
	runs []string
}

func (s *succeeding) Run(_ context.Context, a agent.Attempt) agent.Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs = append(s.runs, a.TaskID)
	return agent.Result{Output: "done"}
}

// leftBy records what a process that died left behind: a RUNNING request
// in a session, a SUCCEEDED one, and three RUNNING tasks — one with a retry
// left, one on its last attempt, one asked to cancel.
func leftBy(t *testing.T, s *store.Store, owner string) {
	t.Helper()
	ctx := context.Background()
	key := store.SessionKey{Account: account, ServerID: "server", ID: "session"}
	request := func(id, status string) *store.Execution {
		return &store.Execution{ID: id, Account: account, ActionID: "server", ActionName: "server", EventType: "mcp.request",
			Role: store.RoleRequest, SessionID: key.ID, Status: status, Caller: "p", Subject: "u", Client: "c", Owner: owner,
			Input: json.RawMessage(`{"method":"tools/call"}`)}
	}
	err := s.Write(ctx, func(tx *store.Tx) error {
		if err := tx.RegisterProcess(ctx, owner); err != nil {
			return err
		}
		if _, _, err := tx.LockSession(ctx, key, json.RawMessage(`{}`)); err != nil {
			return err
		}
		for _, e := range []*store.Execution{request("running-request", store.Running), request("answered-request", store.Succeeded)} {
			if e.Status == store.Succeeded {
				e.Output = json.RawMessage(`{"content":[]}`)
			}
			if err := tx.InsertExecution(ctx, e); err != nil {
				return err
			}
			if _, err := tx.AppendSessionInput(ctx, key, e.ID); err != nil {
				return err
			}
		}
		for _, id := range []string{"retried", "exhausted", "cancelled"} {
			e := &store.Execution{ID: id, Account: account, ActionID: "agent", ActionName: "agent", EventType: "task.start", Role: store.RoleTask,
				Caller: "p", Subject: "u", Client: "c"}
			attempts := 2
			if id == "exhausted" {
				attempts = 1
			}
			task := &store.Task{ExecutionID: id, Account: account, ServerID: "server", SessionID: key.ID, Principal: "p", Subject: "u",
				Spec: json.RawMessage(`{}`), MaxAttempts: attempts}
			if err := tx.StartTask(ctx, e, task, store.TaskLimits{}); err != nil {
				return err
			}
		}
		if _, err := tx.ClaimTasks(ctx, owner, 3); err != nil {
			return err
		}
		_, err := tx.CancelTask(ctx, account, "cancelled", json.RawMessage(`{"principal":"p","subject":"u","executionId":"r"}`))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, s *store.Store, id string) *store.Execution {
	t.Helper()
	var e *store.Execution
	ctx := context.Background()
	if err := s.Read(ctx, func(tx *store.Tx) error {
		var err error
		e, err = tx.Execution(ctx, account, id)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return e
}

// What a stopped process left RUNNING is settled by the next process to
// notice, once the stopped one's heartbeat is older than the liveness (on
// Postgres; on SQLite, the one process of its database, at once): its
// RUNNING request FAILED with mcp_request_abandoned, no output, its session
// input CONSUMED; its tasks retried while retries remain, EXHAUSTED when
// they ran out, CANCELLED when asked to; its SUCCEEDED records untouched.
func TestSettlesWhatAStoppedProcessLeft(t *testing.T) {
	for _, sole := range []bool{false, true} {
		storetest.Each(t, func(t *testing.T, d store.Dialect) {
			if sole && d == store.Postgres {
				return // Sole is how the SQLite process starts
			}
			fake := clock.NewFake(start)
			s := storetest.Open(t, d, fake)
			leftBy(t, s, "stopped")
			runner := &succeeding{}
			service := New(Options{Store: s, Runner: runner, IDs: &sequence{}, Clock: fake, Process: "alive", Liveness: 15 * time.Second, Sole: sole})
			if !sole {
				// Young heartbeat: nothing is settled at start.
				if err := service.Open(context.Background()); err != nil {
					t.Fatal(err)
				}
				if e := read(t, s, "running-request"); e.Status != store.Running {
					t.Fatalf("a request of a process that beat 0 s ago was settled: %s", e.Status)
				}
				service.Close()
				fake.Advance(16 * time.Second)
				service = New(Options{Store: s, Runner: runner, IDs: &sequence{}, Clock: fake, Process: "alive", Liveness: 15 * time.Second})
			}
			if err := service.Open(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer service.Close()

			request := read(t, s, "running-request")
			var failure struct{ Code string }
			json.Unmarshal(request.Error, &failure)
			if request.Status != store.Failed || failure.Code != CodeRequestAbandoned || request.Output != nil || request.EndedAt.IsZero() || request.SessionID != "session" {
				t.Errorf("the abandoned request: %+v", request)
			}
			if answered := read(t, s, "answered-request"); answered.Status != store.Succeeded || string(answered.Output) != `{"content":[]}` {
				t.Errorf("the SUCCEEDED request was touched: %+v", answered)
			}
			var inputs []store.SessionInput
			ctx := context.Background()
			s.Read(ctx, func(tx *store.Tx) error {
				var err error
				inputs, err = tx.SessionInputs(ctx, store.SessionKey{Account: account, ServerID: "server", ID: "session"})
				return err
			})
			for _, in := range inputs {
				if in.ExecutionID == "running-request" && in.State != store.InputConsumed {
					t.Errorf("the abandoned request's input is %s", in.State)
				}
			}
			for id, want := range map[string]string{"retried": store.RetryScheduled, "exhausted": store.Exhausted, "cancelled": store.Cancelled} {
				if e := read(t, s, id); e.Status != want {
					t.Errorf("task %s is %s, want %s", id, e.Status, want)
				}
			}
			if e := read(t, s, "cancelled"); string(e.CancelledBy) == "" {
				t.Errorf("the cancelled task has no cancelledBy")
			}
			var dead []string
			s.Read(ctx, func(tx *store.Tx) error {
				var err error
				dead, err = tx.DeadProcesses(ctx, "alive", start.Add(time.Hour))
				return err
			})
			if len(dead) != 0 {
				t.Errorf("the stopped process is still recorded: %v", dead)
			}
		})
	}
}

// ACT-169, ACT-170: a hint a task returns names a denying layer by name
// alone; one that would name more — an action's ID, a policy's index, the
// principal — is replaced by a generic one.
func TestTaskHintsNameNoMoreThanALayer(t *testing.T) {
	task := &store.Task{Principal: "signin"}
	for hint, want := range map[string]string{
		"This MCP server's policies do not include INSERT on financial.KVValue: use a tool that does not need it.": "keep",
		"Action 3c1e4d1a-7a1b-4bde-9b7e-6b8f3f0c5a21 denied it.":                                                   GenericHint,
		"Denied by policies[2] of the server.":                                                                     GenericHint,
		"Ask signin's administrator for INVOKE.":                                                                   GenericHint,
		"Ask the signing team.":                                                                                    "keep",
		"":                                                                                                         "",
	} {
		got := safeHint(hint, task)
		if want == "keep" {
			want = hint
		}
		if got != want {
			t.Errorf("safeHint(%q) = %q, want %q", hint, got, want)
		}
	}
}
