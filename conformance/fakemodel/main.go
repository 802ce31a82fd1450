// Command fakemodel is the model provider of the conformance fixtures: a
// loopback server speaking the Anthropic Messages API, streaming, whose
// answers the agent's model name chooses (internal/actiond/modeltest):
//
//	conformance-compute     waits input.seconds, then answers with text
//	conformance-invalid     answers text that is not the JSON the agent's
//	                        outputSchema asks for (the task ends FAILED)
//	conformance-overloaded  answers HTTP 529 overloaded_error (the task's
//	                        retries run out: EXHAUSTED)
//
// It writes its base URL to -addr-file and serves until killed.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/incusspawn/isx/internal/actiond/modeltest"
)

func main() {
	addrFile := flag.String("addr-file", "", "write the base URL here once listening")
	flag.Parse()
	server, err := modeltest.Start(script, modeltest.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakemodel:", err)
		os.Exit(1)
	}
	defer server.Close()
	if *addrFile != "" {
		if err := os.WriteFile(*addrFile, []byte(server.URL), 0o600); err != nil {
			fmt.Fprintln(os.Stderr, "fakemodel:", err)
			os.Exit(1)
		}
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	<-stop
}

func script(x modeltest.Exchange) modeltest.Reply {
	switch x.Model {
	case "conformance-compute":
		input := x.Input()
		seconds, _ := input["seconds"].(float64)
		label, _ := input["label"].(string)
		return modeltest.Reply{Delay: time.Duration(seconds * float64(time.Second)),
			Text: fmt.Sprintf("Computed %s after %g s.", label, seconds)}
	case "conformance-invalid":
		return modeltest.Reply{Text: "This is not the JSON the schema asks for."}
	case "conformance-overloaded":
		return modeltest.Reply{Status: 529, ErrorType: "overloaded_error"}
	}
	return modeltest.Reply{Status: 404, ErrorType: "not_found_error"}
}
