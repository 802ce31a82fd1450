package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"go.uber.org/goleak"

	"github.com/incusspawn/isx/internal/actiond/modeltest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// providers is both APIs of one fake provider, keyed as configured.
func providers(t *testing.T, server *modeltest.Server, key string) *Providers {
	t.Helper()
	p, err := NewProviders([]Provider{
		{Name: "anthropic", API: APIAnthropic, BaseURL: server.URL, APIKey: key},
		{Name: "chat", API: APIOpenAI, BaseURL: server.URL + "/v1", APIKeyEnv: "CHAT_KEY"},
	}, func(name string) string {
		if name == "CHAT_KEY" {
			return key
		}
		return ""
	}, &http.Client{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func start(t *testing.T, key string, script modeltest.Script) *modeltest.Server {
	t.Helper()
	server, err := modeltest.Start(script, modeltest.Options{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(server.Close)
	return server
}

// Both APIs, streamed as their providers stream: text arrives in deltas, a
// tool use's input in pieces of JSON, and the key configured for the
// provider is the one sent; the conversation, with a tool use and its
// result, reaches the provider as it was.
func TestExchangeOverBothAPIs(t *testing.T) {
	server := start(t, "secret-key", func(x modeltest.Exchange) modeltest.Reply {
		if x.Turn() == 1 {
			return modeltest.Reply{Text: "Let me look that up, it may take a moment.", ToolUses: []modeltest.ToolUse{{Name: "lookup", Input: map[string]any{"account": "a-1", "depth": 2.0}}}}
		}
		results := x.LastResults()
		if len(results) != 1 || results[0].Content != `{"balance":"12.50"}` || results[0].IsError {
			return modeltest.Reply{Text: "unexpected results"}
		}
		return modeltest.Reply{Text: "The balance is 12.50."}
	})
	models := providers(t, server, "secret-key")
	for _, name := range []string{"anthropic", "chat"} {
		t.Run(name, func(t *testing.T) {
			model, err := models.Model(name)
			if err != nil {
				t.Fatal(err)
			}
			req := Request{Model: "m", System: "Be brief.", MaxTokens: 100,
				Tools:    []ToolSpec{{Name: "lookup", Description: "Looks an account up.", InputSchema: map[string]any{"type": "object"}}},
				Messages: []Message{{Role: "user", Content: []Block{{Type: BlockText, Text: `Input:{"account":"a-1"}`}}}}}
			first, err := model.Exchange(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if first.StopReason != StopToolUse || len(first.Content) != 2 || first.Content[0].Text != "Let me look that up, it may take a moment." {
				t.Fatalf("first answer %+v", first)
			}
			use := first.Content[1]
			var input map[string]any
			json.Unmarshal(use.Input, &input)
			if use.Type != BlockToolUse || use.Name != "lookup" || use.ID == "" || input["account"] != "a-1" || input["depth"] != 2.0 {
				t.Fatalf("tool use %+v", use)
			}
			req.Messages = append(req.Messages, Message{Role: "assistant", Content: first.Content},
				Message{Role: "user", Content: []Block{{Type: BlockToolResult, ToolUseID: use.ID, Content: `{"balance":"12.50"}`}}})
			second, err := model.Exchange(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if second.StopReason != StopEndTurn || len(second.Content) != 1 || second.Content[0].Text != "The balance is 12.50." || second.Usage.InputTokens == 0 {
				t.Fatalf("second answer %+v", second)
			}
		})
	}
	for _, x := range server.Exchanges() {
		if x.Key != "secret-key" || x.System != "Be brief." || len(x.Tools) != 1 || x.Tools[0] != "lookup" {
			t.Errorf("%s exchange: key %q system %q tools %v", x.API, x.Key, x.System, x.Tools)
		}
	}
}

// A provider's failures are told apart by whether another attempt may
// succeed: overloaded (529), rate limited (429), an error event mid-stream
// and a provider that is not there may pass; a refused request (400, 401)
// will not.
func TestExchangeFailures(t *testing.T) {
	replies := map[string]modeltest.Reply{
		"overloaded": {Status: 529, ErrorType: "overloaded_error"},
		"limited":    {Status: 429, ErrorType: "rate_limit_error"},
		"midstream":  {Text: "partial answer that stops", StreamError: "overloaded_error"},
		"refused":    {Status: 400, ErrorType: "invalid_request_error"},
	}
	server := start(t, "k", func(x modeltest.Exchange) modeltest.Reply { return replies[x.Model] })
	models := providers(t, server, "k")
	cases := []struct {
		model     string
		code      string
		retryable bool
	}{
		{"overloaded", CodeModelUnavailable, true},
		{"limited", CodeModelUnavailable, true},
		{"midstream", CodeModelUnavailable, true},
		{"refused", CodeModelRequestFailed, false},
	}
	for _, provider := range []string{"anthropic", "chat"} {
		model, _ := models.Model(provider)
		for _, c := range cases {
			_, err := model.Exchange(context.Background(), Request{Model: c.model, MaxTokens: 10, Messages: []Message{{Role: "user", Content: []Block{{Type: BlockText, Text: "hi"}}}}})
			var merr *ModelError
			if !errors.As(err, &merr) || merr.Code != c.code || merr.Retryable != c.retryable || merr.Hint == "" {
				t.Errorf("%s %s: %v, want %s retryable %v", provider, c.model, err, c.code, c.retryable)
			}
		}
	}
	wrongKey, _ := providers(t, server, "not-the-key").Model("anthropic")
	_, err := wrongKey.Exchange(context.Background(), Request{Model: "m", MaxTokens: 10, Messages: []Message{{Role: "user", Content: []Block{{Type: BlockText, Text: "hi"}}}}})
	var merr *ModelError
	if !errors.As(err, &merr) || merr.Status != 401 || merr.Retryable {
		t.Errorf("a wrong key: %v", err)
	}
	closed := start(t, "", func(modeltest.Exchange) modeltest.Reply { return modeltest.Reply{} })
	gone, _ := providers(t, closed, "any").Model("anthropic")
	closed.Close()
	_, err = gone.Exchange(context.Background(), Request{Model: "m", MaxTokens: 10})
	if !errors.As(err, &merr) || !merr.Retryable {
		t.Errorf("a provider that is not there: %v", err)
	}
}

// A definition names a provider; configuration says where it is. An
// unconfigured name is model_not_configured, and the environment's
// ANTHROPIC_* variables define the anthropic provider when the
// configuration does not.
func TestProvidersFromConfiguration(t *testing.T) {
	p, err := NewProviders(nil, func(name string) string {
		return map[string]string{"ANTHROPIC_BASE_URL": "http://127.0.0.1:1", "ANTHROPIC_API_KEY": "k"}[name]
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Model("anthropic"); err != nil {
		t.Errorf("anthropic from the environment: %v", err)
	}
	_, err = p.Model("openai")
	var merr *ModelError
	if !errors.As(err, &merr) || merr.Code != CodeModelNotConfigured {
		t.Errorf("an unconfigured provider: %v", err)
	}
	for _, bad := range []Provider{
		{Name: "Bad Name", API: APIAnthropic, BaseURL: "http://x"},
		{Name: "x", API: "gemini", BaseURL: "http://x"},
		{Name: "x", API: APIAnthropic, BaseURL: "ftp://x"},
		{Name: "x", API: APIAnthropic, BaseURL: "http://x", APIKey: "a", APIKeyEnv: "B"},
		{Name: "x", API: APIAnthropic, BaseURL: "http://x", APIKeyEnv: "UNSET"},
	} {
		if _, err := NewProviders([]Provider{bad}, func(string) string { return "" }, nil); err == nil {
			t.Errorf("%+v was accepted", bad)
		}
	}
}
