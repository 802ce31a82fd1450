// Command instanceclient is what the host proxy's tests run inside
// instances: a model call, a download or a WebSocket, through whatever
// proxy the environment names (HTTPS_PROXY and the like) and trusting the
// CA bundle it names (SSL_CERT_FILE), as an agent's tools would.
//
//	instanceclient messages -url URL [-key KEY | -key-file FILE] [-stream]
//	instanceclient get -url URL
//	instanceclient ws -url URL -until FILE [-secret-file FILE]
//	instanceclient mcp [-url URL] [-secret-file FILE] tools|call TOOL JSON|two
//	instanceclient load -url URL -n N -c C [-secret-file FILE]
//	instanceclient request -url URL [-method M] [-secret-file FILE] [-header 'K: V']... [-body B]
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/coder/websocket"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: instanceclient messages|get|ws ...")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "messages":
		err = messages(os.Args[2:])
	case "get":
		err = get(os.Args[2:])
	case "ws":
		err = ws(os.Args[2:])
	case "request":
		err = request(os.Args[2:])
	case "mcp":
		err = mcpCommand(os.Args[2:])
	case "load":
		err = load(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "instanceclient:", err)
		os.Exit(1)
	}
}

func messages(args []string) error {
	flags := flag.NewFlagSet("messages", flag.ExitOnError)
	target := flags.String("url", "", "the Messages endpoint")
	key := flags.String("key", "", "the API key to send")
	keyFile := flags.String("key-file", "", "a file holding the API key")
	stream := flags.Bool("stream", false, "ask for an SSE stream")
	flags.Parse(args) //nolint:errcheck // ExitOnError
	if *keyFile != "" {
		data, err := os.ReadFile(*keyFile)
		if err != nil {
			return err
		}
		*key = strings.TrimSpace(string(data))
	}
	body := fmt.Sprintf(`{"model":"claude-test","max_tokens":64,"stream":%t,"messages":[{"role":"user","content":"hello"}]}`, *stream)
	req, err := http.NewRequest(http.MethodPost, *target, bytes.NewReader([]byte(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	if *key != "" {
		req.Header.Set("X-Api-Key", *key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	fmt.Printf("status=%d\n", resp.StatusCode)
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	for lines.Scan() {
		fmt.Println(lines.Text())
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s", resp.Status)
	}
	return lines.Err()
}

func get(args []string) error {
	flags := flag.NewFlagSet("get", flag.ExitOnError)
	target := flags.String("url", "", "what to download")
	flags.Parse(args) //nolint:errcheck // ExitOnError
	resp, err := http.Get(*target)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	h := sha256.New()
	n, err := io.Copy(h, resp.Body)
	fmt.Printf("status=%d bytes=%d sha256=%s\n", resp.StatusCode, n, hex.EncodeToString(h.Sum(nil)))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s", resp.Status)
	}
	return nil
}

func ws(args []string) error {
	flags := flag.NewFlagSet("ws", flag.ExitOnError)
	target := flags.String("url", "", "the WebSocket")
	until := flags.String("until", "", "hold the WebSocket open until this file exists")
	secretFile := flags.String("secret-file", "", "send this file's content as X-Isx-Instance-Secret")
	flags.Parse(args) //nolint:errcheck // ExitOnError
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	header := http.Header{}
	if *secretFile != "" {
		data, err := os.ReadFile(*secretFile)
		if err != nil {
			return err
		}
		header.Set("X-Isx-Instance-Secret", strings.TrimSpace(string(data)))
	}
	c, resp, err := websocket.Dial(ctx, *target, &websocket.DialOptions{HTTPClient: http.DefaultClient, HTTPHeader: header})
	if err != nil {
		if resp != nil {
			fmt.Printf("status=%d\n", resp.StatusCode)
		}
		return err
	}
	defer c.CloseNow()
	if err := c.Write(ctx, websocket.MessageText, []byte("ping")); err != nil {
		return err
	}
	_, echo, err := c.Read(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("open echo=%s\n", echo)
	for *until != "" {
		if _, err := os.Stat(*until); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := c.Close(websocket.StatusNormalClosure, "done"); err != nil {
		return err
	}
	fmt.Println("closed")
	return nil
}

// headerFlags are repeated -header flags.
type headerFlags []string

func (h *headerFlags) String() string     { return strings.Join(*h, ", ") }
func (h *headerFlags) Set(v string) error { *h = append(*h, v); return nil }

// request sends one request and prints its status, its headers (one
// "header Name: value" line each) and its body after "body=".
func request(args []string) error {
	flags := flag.NewFlagSet("request", flag.ExitOnError)
	target := flags.String("url", "", "where to send it")
	method := flags.String("method", http.MethodGet, "the method")
	secretFile := flags.String("secret-file", "", "send this file's content as X-Isx-Instance-Secret")
	body := flags.String("body", "", "the request body")
	var headers headerFlags
	flags.Var(&headers, "header", "a header to send, 'Name: value' (repeatable)")
	flags.Parse(args) //nolint:errcheck // ExitOnError
	req, err := http.NewRequest(*method, *target, strings.NewReader(*body))
	if err != nil {
		return err
	}
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ":")
		req.Header.Add(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	if *secretFile != "" {
		data, err := os.ReadFile(*secretFile)
		if err != nil {
			return err
		}
		req.Header.Set("X-Isx-Instance-Secret", strings.TrimSpace(string(data)))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	fmt.Printf("status=%d\n", resp.StatusCode)
	for name, values := range resp.Header {
		for _, v := range values {
			fmt.Printf("header %s: %s\n", name, v)
		}
	}
	fmt.Printf("body=%s\n", data)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("status %s", resp.Status)
	}
	return nil
}

// load sends n GET requests, c at a time, and prints how many per second
// were answered 200.
func load(args []string) error {
	flags := flag.NewFlagSet("load", flag.ExitOnError)
	target := flags.String("url", "", "where to send them")
	n := flags.Int("n", 1000, "how many requests")
	c := flags.Int("c", 8, "how many at a time")
	secretFile := flags.String("secret-file", "", "send this file's content as X-Isx-Instance-Secret")
	flags.Parse(args) //nolint:errcheck // ExitOnError
	secret := ""
	if *secretFile != "" {
		data, err := os.ReadFile(*secretFile)
		if err != nil {
			return err
		}
		secret = strings.TrimSpace(string(data))
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = *c
	client := &http.Client{Transport: transport}
	jobs := make(chan struct{}, *n)
	for range *n {
		jobs <- struct{}{}
	}
	close(jobs)
	errs := make(chan error, *c)
	began := time.Now()
	for range *c {
		go func() {
			for range jobs {
				req, _ := http.NewRequest(http.MethodGet, *target, nil)
				if secret != "" {
					req.Header.Set("X-Isx-Instance-Secret", secret)
				}
				resp, err := client.Do(req)
				if err != nil {
					errs <- err
					return
				}
				io.Copy(io.Discard, resp.Body) //nolint:errcheck // counted by status
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("status %s", resp.Status)
					return
				}
			}
			errs <- nil
		}()
	}
	for range *c {
		if err := <-errs; err != nil {
			return err
		}
	}
	took := time.Since(began)
	fmt.Printf("requests=%d seconds=%.3f rps=%.0f\n", *n, took.Seconds(), float64(*n)/took.Seconds())
	return nil
}
