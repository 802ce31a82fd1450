// Command mcpload drives an MCP server's tools/call over Streamable HTTP
// (revision 2026-07-28, stateless) from N concurrent clients and reports
// requests per second and latency percentiles. -url may list several
// endpoints, comma-separated: the clients are split between them evenly
// (processes sharing one database). -token may list several tokens,
// comma-separated: client i sends the i-th, round robin (a session each,
// when the tokens name different subjects).
//
//	mcpload -url http://127.0.0.1:8080/mcp/v1/000000000000/bench -token $T \
//	        -tool double -args '{"n":21,"intent":"benchmark"}' -c 16 -d 20s
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	url := flag.String("url", "", "the MCP endpoint, or several, comma-separated")
	token := flag.String("token", "", "bearer token (optional), or several, comma-separated")
	tool := flag.String("tool", "", "tool to call")
	args := flag.String("args", "{}", "tool arguments as JSON")
	clients := flag.Int("c", 16, "concurrent clients")
	duration := flag.Duration("d", 20*time.Second, "how long to measure")
	warmup := flag.Duration("warmup", 3*time.Second, "how long to run before measuring")
	label := flag.String("label", "", "name printed with the result")
	flag.Parse()
	if *url == "" || *tool == "" {
		fmt.Fprintln(os.Stderr, "mcpload: -url and -tool are required")
		os.Exit(2)
	}
	var arguments map[string]any
	if err := json.Unmarshal([]byte(*args), &arguments); err != nil {
		fmt.Fprintf(os.Stderr, "mcpload: -args is not a JSON object: %v\n", err)
		os.Exit(2)
	}
	var tokens []string
	if *token != "" {
		tokens = strings.Split(*token, ",")
	}
	result, err := run(strings.Split(*url, ","), tokens, *tool, arguments, *clients, *warmup, *duration)
	if err != nil {
		fmt.Fprintf(os.Stderr, "mcpload: %v\n", err)
		os.Exit(1)
	}
	out, _ := json.Marshal(map[string]any{
		"label": *label, "clients": *clients, "seconds": duration.Seconds(), "requests": result.count,
		"errors": result.errors, "rps": float64(result.count) / duration.Seconds(),
		"p50_ms": result.percentile(0.50), "p99_ms": result.percentile(0.99),
	})
	fmt.Println(string(out))
}

type outcome struct {
	count, errors int64
	latencies     []time.Duration
}

func (o *outcome) percentile(p float64) float64 {
	if len(o.latencies) == 0 {
		return 0
	}
	sort.Slice(o.latencies, func(i, j int) bool { return o.latencies[i] < o.latencies[j] })
	i := int(float64(len(o.latencies)-1) * p)
	return float64(o.latencies[i].Microseconds()) / 1000
}

func run(urls, tokens []string, tool string, arguments map[string]any, clients int, warmup, duration time.Duration) (*outcome, error) {
	transport := &http.Transport{MaxIdleConnsPerHost: clients * 2, MaxConnsPerHost: clients * 2}
	client := &http.Client{Transport: transport, Timeout: 30 * time.Second}
	var measuring atomic.Bool
	var total outcome
	var mu sync.Mutex
	ctx, cancel := context.WithTimeout(context.Background(), warmup+duration)
	defer cancel()
	time.AfterFunc(warmup, func() { measuring.Store(true) })
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine outcome
			for i := 0; ctx.Err() == nil; i++ {
				began := time.Now()
				token := ""
				if len(tokens) > 0 {
					token = tokens[c%len(tokens)]
				}
				err := call(ctx, client, urls[c%len(urls)], token, tool, arguments, c*1_000_000+i)
				if ctx.Err() != nil {
					break
				}
				if !measuring.Load() {
					continue
				}
				mine.count++
				mine.latencies = append(mine.latencies, time.Since(began))
				if err != nil {
					mine.errors++
					firstErr.CompareAndSwap(nil, err)
				}
			}
			mu.Lock()
			total.count += mine.count
			total.errors += mine.errors
			total.latencies = append(total.latencies, mine.latencies...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if e, ok := firstErr.Load().(error); ok && total.errors == total.count {
		return nil, fmt.Errorf("every call failed; the first: %w", e)
	}
	if e, ok := firstErr.Load().(error); ok {
		fmt.Fprintf(os.Stderr, "mcpload: %d of %d calls failed; the first: %v\n", total.errors, total.count, e)
	}
	return &total, nil
}

func call(ctx context.Context, client *http.Client, url, token, tool string, arguments map[string]any, id int) error {
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": id, "method": "tools/call",
		"params": map[string]any{
			"name": tool, "arguments": arguments,
			"_meta": map[string]any{
				"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
				"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "mcpload", "version": "1"},
				"io.modelcontextprotocol/clientCapabilities": map[string]any{},
			},
		},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	reply, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, reply)
	}
	var v struct {
		Result *struct {
			IsError bool `json:"isError"`
		} `json:"result"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(reply, &v); err != nil || v.Result == nil || v.Result.IsError {
		return fmt.Errorf("unexpected reply: %.300s", reply)
	}
	return nil
}
