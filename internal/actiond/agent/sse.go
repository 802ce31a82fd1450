package agent

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// event is one server-sent event.
type event struct {
	name string
	data string
}

// maxEventLine bounds one line of a stream: a tool use's input arrives in
// many small deltas, but a provider may send a large one.
const maxEventLine = 4 << 20

// maxResponseBytes bounds one answer of a model: the events' data in all.
// A provider that streams on and on would otherwise fill memory, however
// small each event, until the exchange's deadline.
const maxResponseBytes = 32 << 20

// errResponseTooLarge is a stream past maxResponseBytes.
var errResponseTooLarge = fmt.Errorf("the answer is larger than %d bytes", maxResponseBytes)

// readEvents calls fn for each event of a text/event-stream body until the
// body ends, fn returns false, or a read fails.
func readEvents(body io.Reader, fn func(event) bool) error {
	scanner := bufio.NewScanner(body)
	scanner.Buffer(make([]byte, 0, 64<<10), maxEventLine)
	var current event
	var data []string
	total := 0
	dispatch := func() bool {
		if current.name == "" && len(data) == 0 {
			return true
		}
		current.data = strings.Join(data, "\n")
		keep := fn(current)
		current, data = event{}, nil
		return keep
	}
	for scanner.Scan() {
		line := scanner.Text()
		switch {
		case line == "":
			if !dispatch() {
				return nil
			}
		case strings.HasPrefix(line, ":"):
			// a comment, such as a keep-alive
		case strings.HasPrefix(line, "event:"):
			current.name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			if total += len(line); total > maxResponseBytes {
				return errResponseTooLarge
			}
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	if err := scanner.Err(); err != nil {
		return err
	}
	dispatch()
	return nil
}
