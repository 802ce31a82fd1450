package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpCommand is a real MCP client (the go-sdk's) at a Streamable HTTP
// endpoint, through whatever proxy the environment names:
//
//	instanceclient mcp -url URL -secret-file FILE tools
//	instanceclient mcp -url URL -secret-file FILE call TOOL JSON
//	instanceclient mcp -url URL -secret-file FILE two
//	instanceclient mcp -url URL -secret-file FILE bench N TOOL JSON
//	instanceclient mcp -url URL -secret-file FILE held FILE
func mcpCommand(args []string) error {
	flags := flag.NewFlagSet("mcp", flag.ExitOnError)
	endpoint := flags.String("url", "https://mcp.isx.internal/mcp", "the MCP endpoint")
	secretFile := flags.String("secret-file", "", "send this file's content as X-Isx-Instance-Secret")
	flags.Parse(args) //nolint:errcheck // ExitOnError
	rest := flags.Args()
	if len(rest) == 0 {
		return errors.New("mcp: say tools, call or two")
	}
	header := http.Header{}
	if *secretFile != "" {
		data, err := os.ReadFile(*secretFile)
		if err != nil {
			return err
		}
		header.Set("X-Isx-Instance-Secret", strings.TrimSpace(string(data)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	connect := func() (*mcp.ClientSession, error) {
		c := mcp.NewClient(&mcp.Implementation{Name: "instanceclient", Version: "test"}, nil)
		return c.Connect(ctx, &mcp.StreamableClientTransport{
			Endpoint:   *endpoint,
			HTTPClient: &http.Client{Transport: &withHeader{header: header, inner: http.DefaultTransport}},
		}, nil)
	}
	session, err := connect()
	if err != nil {
		return err
	}
	defer session.Close()
	switch rest[0] {
	case "tools":
		info := session.InitializeResult().ServerInfo
		tools, err := session.ListTools(ctx, nil)
		if err != nil {
			return err
		}
		names := make([]string, 0, len(tools.Tools))
		for _, t := range tools.Tools {
			names = append(names, t.Name)
		}
		prompts, err := session.ListPrompts(ctx, nil)
		if err != nil {
			return err
		}
		var promptNames []string
		for _, p := range prompts.Prompts {
			promptNames = append(promptNames, p.Name)
		}
		fmt.Printf("server=%s version=%s tools=%d\nnames=%s\nprompts=%s\n", info.Name, info.Version, len(names), strings.Join(names, ","), strings.Join(promptNames, ","))
		return nil
	case "call":
		if len(rest) != 3 {
			return errors.New("mcp call TOOL JSON")
		}
		var arguments map[string]any
		if err := json.Unmarshal([]byte(rest[2]), &arguments); err != nil {
			return fmt.Errorf("the arguments: %w", err)
		}
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: rest[1], Arguments: arguments})
		if err != nil {
			return err
		}
		out, _ := json.Marshal(res.StructuredContent)
		fmt.Printf("isError=%t\nresult=%s\n", res.IsError, out)
		for _, c := range res.Content {
			if text, ok := c.(*mcp.TextContent); ok {
				fmt.Printf("text=%s\n", strings.ReplaceAll(text.Text, "\n", " "))
			}
		}
		return nil
	case "bench":
		return bench(ctx, session, rest)
	case "held":
		if len(rest) != 2 {
			return errors.New("mcp held FILE")
		}
		probe := func() string {
			body := strings.NewReader(`{"jsonrpc":"2.0","id":99,"method":"tools/list"}`)
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, *endpoint, body)
			if err != nil {
				return err.Error()
			}
			req.Header = header.Clone()
			req.Header.Set("Mcp-Session-Id", session.ID())
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err.Error()
			}
			defer resp.Body.Close()
			return resp.Status
		}
		return held(ctx, session, rest[1], probe)
	case "two":
		second, err := connect()
		if err != nil {
			return fmt.Errorf("the second connection: %w", err)
		}
		defer second.Close()
		if _, err := second.ListTools(ctx, nil); err != nil {
			return fmt.Errorf("the second connection: %w", err)
		}
		fmt.Println("second=ok")
		if _, err := session.ListTools(ctx, nil); err != nil {
			fmt.Printf("first=ended (%v)\n", err)
		} else {
			fmt.Println("first=alive")
		}
		return nil
	}
	return fmt.Errorf("mcp: unknown %q", rest[0])
}

type withHeader struct {
	header http.Header
	inner  http.RoundTripper
}

func (t *withHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for name, values := range t.header {
		r.Header[name] = values
	}
	return t.inner.RoundTrip(r)
}

// bench makes n calls of one tool on one connection and prints the
// median and mean time of a call.
func bench(ctx context.Context, session *mcp.ClientSession, rest []string) error {
	if len(rest) != 4 {
		return errors.New("mcp bench N TOOL JSON")
	}
	var n int
	if _, err := fmt.Sscan(rest[1], &n); err != nil || n < 1 {
		return fmt.Errorf("bench: %q is not a count", rest[1])
	}
	var arguments map[string]any
	if err := json.Unmarshal([]byte(rest[3]), &arguments); err != nil {
		return fmt.Errorf("the arguments: %w", err)
	}
	took := make([]time.Duration, 0, n)
	began := time.Now()
	for range n {
		start := time.Now()
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: rest[2], Arguments: arguments})
		if err != nil {
			return err
		}
		if res.IsError {
			return fmt.Errorf("%s failed: %+v", rest[2], res.Content)
		}
		took = append(took, time.Since(start))
	}
	total := time.Since(began)
	slices.Sort(took)
	fmt.Printf("calls=%d median_ns=%d mean_ns=%d\n", n, took[n/2].Nanoseconds(), total.Nanoseconds()/int64(n))
	return nil
}

// held uses one session, then keeps using it once file exists: every
// call carries the session's Mcp-Session-Id. It prints whether a call
// was refused within 20 s, and after how many, and then what the proxy
// answers a request of that session (probe): the first refusal can be the
// session's backend ending as Incus reports the change, after which the
// SDK's client repeats its first error without asking again.
func held(ctx context.Context, session *mcp.ClientSession, file string, probe func() string) error {
	if _, err := session.ListTools(ctx, nil); err != nil {
		return err
	}
	fmt.Println("first=ok")
	for {
		if _, err := os.Stat(file); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	deadline := time.Now().Add(20 * time.Second)
	for n := 1; ; n++ {
		if _, err := session.ListTools(ctx, nil); err != nil {
			fmt.Printf("then=refused after %d calls: %v\n", n, err)
			// The proxy may keep what Incus said of the grant for up to
			// two seconds; within five it must refuse the session.
			answer := probe()
			for wait := time.Now().Add(5 * time.Second); strings.HasPrefix(answer, "2") && time.Now().Before(wait); answer = probe() {
				time.Sleep(200 * time.Millisecond)
			}
			fmt.Printf("and then: %s\n", answer)
			return nil
		}
		if time.Now().After(deadline) {
			fmt.Printf("then=served %d calls in 20 s\n", n)
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}
