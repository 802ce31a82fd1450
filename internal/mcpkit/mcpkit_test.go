package mcpkit

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type color string

type paintArgs struct {
	Wall   string   `json:"wall" jsonschema:"which wall" pattern:"^[a-z]{1,8}$"`
	Coats  *int     `json:"coats,omitempty" minimum:"1" maximum:"3"`
	Color  color    `json:"color"`
	Note   string   `json:"note,omitempty" maxLength:"10"`
	Brush  []brush  `json:"brushes,omitempty" minItems:"1" maxItems:"2"`
	Finish string   `json:"finish,omitempty" enum:"matt|gloss"`
	Tags   []string `json:"tags,omitempty"`
}

type brush struct {
	Size int `json:"size" minimum:"1"`
}

func (a *paintArgs) Validate() error {
	if a.Wall == "ceiling" {
		return errors.New("ceilings are not walls")
	}
	return nil
}

type paintResult struct {
	Wall    string `json:"wall"`
	Painted bool   `json:"painted"`
}

var paint = NewTool[paintArgs, paintResult](Spec{
	Name: "paint", Description: "Paints a wall.",
	Types:   []TypeSchema{Enum[color]("red", "blue")},
	Retired: map[string]string{"brush_size": "brush_size no longer exists: give brushes"},
})

func TestSchemaCarriesBoundsFromTags(t *testing.T) {
	in := paint.InputSchema()
	if in.AdditionalProperties == nil || in.AdditionalProperties.Not == nil {
		t.Errorf("the input object is not closed: %+v", in.AdditionalProperties)
	}
	if p := Property(in, "wall"); p.Pattern != "^[a-z]{1,8}$" || p.Description != "which wall" {
		t.Errorf("wall = %+v", p)
	}
	if p := Property(in, "coats"); p.Type != "integer" || *p.Minimum != 1 || *p.Maximum != 3 {
		t.Errorf("coats = %+v (the null of a pointer is dropped, bounds applied)", p)
	}
	if p := Property(in, "color"); len(p.Enum) != 2 {
		t.Errorf("color enum = %v", p.Enum)
	}
	if p := Property(in, "brushes"); *p.MinItems != 1 || *p.MaxItems != 2 || *p.Items.Properties["size"].Minimum != 1 {
		t.Errorf("brushes = %+v", p)
	}
	if p := Property(in, "finish"); len(p.Enum) != 2 || p.Enum[1] != "gloss" {
		t.Errorf("finish = %+v", p)
	}
	if got := strings.Join(in.Required, ","); got != "wall,color" {
		t.Errorf("required = %s", got)
	}
	m := SchemaMap(in)
	if m["type"] != "object" {
		t.Errorf("SchemaMap = %v", m)
	}
}

func TestDecodeValidatesOnceWithMessagesNamingTheArgument(t *testing.T) {
	cases := []struct {
		raw, want string
	}{
		{`{"wall":"north","color":"red","coats":9}`, "coats is 9; give at most 3"},
		{`{"wall":"North","color":"red"}`, `wall "North" is not allowed: it must match ^[a-z]{1,8}$`},
		{`{"color":"red"}`, "wall is required"},
		{`{"wall":"north","color":"green"}`, `color "green" is not one of red, blue`},
		{`{"wall":"north","color":"red","colour":"red"}`, `this tool takes no argument "colour"`},
		{`{"wall":"north","color":"red","coats":"two"}`, "coats must be a whole number, not a string"},
		{`{"wall":"north","color":"red","note":"far too long a note"}`, "note is 19 characters long; at most 10 are accepted"},
		{`{"wall":"north","color":"red","brushes":[{"size":0}]}`, "brushes[0].size is 0; give at least 1"},
		{`{"wall":"north","color":"red","brushes":[]}`, "brushes has 0 items; at least 1 are required"},
		{`{"wall":"north","color":"red","brush_size":3}`, "brush_size no longer exists"},
		{`{"wall":"ceiling","color":"red"}`, "ceilings are not walls"},
	}
	for _, c := range cases {
		_, err := paint.Decode(json.RawMessage(c.raw))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to say %q", c.raw, err, c.want)
		}
	}
	var invalid *InvalidError
	_, err := paint.Decode(json.RawMessage(`{"wall":"north","color":"red","coats":9}`))
	if !errors.As(err, &invalid) || invalid.Path != "coats" {
		t.Errorf("the error does not name coats as its path: %#v", err)
	}
	for _, raw := range []string{`[1]`, `"x"`, `{"a":`} {
		if _, err := paint.Decode(json.RawMessage(raw)); !errors.Is(err, ErrNotObject) {
			t.Errorf("%s: %v, want ErrNotObject", raw, err)
		}
	}
	got, err := paint.Decode(json.RawMessage(`{"wall":"north","color":"blue","coats":2}`))
	if err != nil || got.Wall != "north" || got.Color != "blue" || *got.Coats != 2 {
		t.Fatalf("a valid call decoded to %+v, %v", got, err)
	}
	if _, err := paint.DecodeValue(map[string]any{"wall": "north", "color": "red"}); err != nil {
		t.Errorf("DecodeValue: %v", err)
	}
}

func TestCheckResultValidatesAgainstTheOutputSchema(t *testing.T) {
	if err := paint.CheckResult(paintResult{Wall: "north", Painted: true}); err != nil {
		t.Errorf("a valid result: %v", err)
	}
	if err := paint.CheckResult(map[string]any{"wall": "north", "painted": true, "extra": 1}); err == nil {
		t.Error("a result with a property the schema does not list passed")
	}
}

func TestShapeAdjustsTheDerivedSchemas(t *testing.T) {
	tool := NewTool[paintArgs, paintResult](Spec{Name: "paint2", Types: []TypeSchema{Enum[color]("red")},
		Shape: func(in, out *jsonschema.Schema) (*jsonschema.Schema, *jsonschema.Schema) {
			Property(out, "painted").Const = ptr[any](true)
			return in, out
		}})
	if err := tool.CheckResult(paintResult{Wall: "n", Painted: false}); err == nil {
		t.Error("the shaped output schema was not used")
	}
}

func ptr[T any](v T) *T { return &v }

func TestErrorStyleRoundTrips(t *testing.T) {
	style := ErrorStyle{MetaKey: "test/error", Text: func(e ToolError) string { return "Refused (" + e.Code + "): " + e.Message }}
	res := style.Result(ToolError{Code: "busy", Message: "try later", Facts: map[string]any{"instance": "i1", "code": "ignored"}})
	if !res.IsError || res.StructuredContent != nil {
		t.Fatalf("result = %+v", res)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; text != "Refused (busy): try later" {
		t.Errorf("text = %q", text)
	}
	details := res.Meta["test/error"].(map[string]any)
	if _, has := details["hint"]; has {
		t.Error("an empty hint was carried without AlwaysHint")
	}
	back, ok := style.Of(res)
	if !ok || back.Code != "busy" || back.Message != "try later" || back.Facts["instance"] != "i1" {
		t.Errorf("Of = %+v, %v", back, ok)
	}
	style.AlwaysHint = true
	if _, has := style.Result(ToolError{Code: "x"}).Meta["test/error"].(map[string]any)["hint"]; !has {
		t.Error("AlwaysHint did not carry the empty hint")
	}
	if _, ok := style.Of(&mcp.CallToolResult{}); ok {
		t.Error("Of read an error from a result without isError")
	}
}

// A server sends a notification the SDK has no sender for, and a client
// built on the SDK hears it: the real SDK on both ends.
func TestNotifierAndListener(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	serverSide, clientSide := mcp.NewInMemoryTransports()
	notifier := NewNotifier(serverSide)
	if err := notifier.Notify(ctx, "notifications/test/changed", map[string]any{}); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("Notify before connecting: %v", err)
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	session, err := server.Connect(ctx, notifier, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	heard := make(chan map[string]any, 1)
	listener := NewListener(clientSide, map[string]func(json.RawMessage){
		"notifications/test/changed": func(params json.RawMessage) {
			var v map[string]any
			json.Unmarshal(params, &v)
			heard <- v
		},
	})
	client := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "1"}, nil)
	cs, err := client.Connect(ctx, listener, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if err := notifier.Notify(ctx, "notifications/test/changed", map[string]any{"state": "finished"}); err != nil {
		t.Fatal(err)
	}
	select {
	case v := <-heard:
		if v["state"] != "finished" {
			t.Errorf("heard %v", v)
		}
	case <-ctx.Done():
		t.Fatal("the client never heard the notification")
	}
	// The client still works: the listener passed the rest through.
	if err := cs.Ping(ctx, nil); err != nil {
		t.Errorf("ping after the notification: %v", err)
	}
}

func TestTaskWireShapes(t *testing.T) {
	ttl := int64(86_400_000)
	created := NewCreateTaskResult(Task{TaskID: "t1", Status: TaskWorking, CreatedAt: "2026-12-01T10:00:00Z",
		LastUpdatedAt: "2026-12-01T10:00:00Z", TTLMs: &ttl, PollIntervalMs: 5000})
	raw, err := json.Marshal(created)
	if err != nil {
		t.Fatal(err)
	}
	var flat map[string]any
	json.Unmarshal(raw, &flat)
	for key, want := range map[string]any{"resultType": "task", "taskId": "t1", "status": "working", "ttlMs": 8.64e7, "pollIntervalMs": 5000.0} {
		if flat[key] != want {
			t.Errorf("%s = %v, want %v (in %s)", key, flat[key], want, raw)
		}
	}
	unlimited, _ := json.Marshal(Task{TaskID: "t2", Status: TaskCompleted})
	if !strings.Contains(string(unlimited), `"ttlMs":null`) {
		t.Errorf("an unlimited TTL is not sent as null: %s", unlimited)
	}
	ack, _ := json.Marshal(NewAck())
	if string(ack) != `{"resultType":"complete"}` {
		t.Errorf("ack = %s", ack)
	}
	if !TaskCancelled.Finished() || TaskWorking.Finished() {
		t.Error("Finished is wrong")
	}
}

func TestSkillDigest(t *testing.T) {
	if got := Digest([]byte("")); got != "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Errorf("Digest(\"\") = %s", got)
	}
}
