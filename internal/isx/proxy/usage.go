package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
)

// Bounds of what the meter reads of a response: it never holds more than
// this of a body or of one SSE line, whatever the upstream sends.
const (
	maxUsageJSON = 4 << 20
	maxSSELine   = 1 << 20
)

// usageMeter reads the usage of an Anthropic Messages response as the
// body passes through: a JSON body's top-level usage, or in an SSE stream
// the usage of every data: line (message_start's message.usage,
// message_delta's usage). Within a stream the counts are cumulative, so it
// keeps the largest value of each field, and credits what grew as soon as
// it grows: a long stream is counted while it runs.
type usageMeter struct {
	stream bool
	credit func(Usage)
	// memory, when set, is what the buffers below are counted against:
	// over it the usage goes unread and the body passes on.
	memory interface {
		use(int64) bool
		free(int64)
	}

	body     bytes.Buffer // JSON body, up to maxUsageJSON
	line     []byte       // the SSE line being read
	skipping bool         // the current SSE line is too long and ignored
	seen     Usage        // the stream's largest values
	problem  error        // the first reason usage could not be read
}

func newUsageMeter(contentType string, credit func(Usage)) *usageMeter {
	media, _, _ := mime.ParseMediaType(contentType)
	return &usageMeter{stream: media == "text/event-stream", credit: credit}
}

// Write takes the next bytes of the body; it never fails, since a body
// it cannot read is still passed on.
func (m *usageMeter) Write(p []byte) (int, error) {
	n := len(p)
	if !m.stream {
		if m.skipping {
			return n, nil
		}
		if m.body.Len()+len(p) > maxUsageJSON {
			m.fail(fmt.Errorf("the JSON body is larger than %d bytes", maxUsageJSON))
			m.drop()
			return len(p), nil
		}
		if !m.hold(len(p)) {
			m.drop()
			return n, nil
		}
		m.body.Write(p)
		return len(p), nil
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if !m.skipping {
			switch {
			case len(m.line)+len(chunk) > maxSSELine:
				m.fail(fmt.Errorf("an event line is longer than %d bytes", maxSSELine))
				m.skipLine()
			case !m.hold(len(chunk)):
				m.skipLine()
			default:
				m.line = append(m.line, chunk...)
			}
		}
		if i < 0 {
			break
		}
		if !m.skipping {
			m.event(bytes.TrimSuffix(m.line, []byte("\r")))
		}
		m.unhold(len(m.line))
		m.line, m.skipping = m.line[:0], false
		p = p[i+1:]
	}
	return n, nil
}

type usageFields struct {
	Input         *int64 `json:"input_tokens"`
	Output        *int64 `json:"output_tokens"`
	CacheRead     *int64 `json:"cache_read_input_tokens"`
	CacheCreation *int64 `json:"cache_creation_input_tokens"`
}

func (f *usageFields) usage() Usage {
	value := func(p *int64) int64 {
		if p == nil || *p < 0 {
			return 0
		}
		return *p
	}
	return Usage{value(f.Input), value(f.Output), value(f.CacheRead), value(f.CacheCreation)}
}

type usageCarrier struct {
	Usage   *usageFields `json:"usage"`
	Message *struct {
		Usage *usageFields `json:"usage"`
	} `json:"message"`
}

func (c *usageCarrier) found() *usageFields {
	if c.Usage != nil {
		return c.Usage
	}
	if c.Message != nil {
		return c.Message.Usage
	}
	return nil
}

func (m *usageMeter) event(line []byte) {
	data, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok {
		return
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return
	}
	var c usageCarrier
	if err := json.Unmarshal(data, &c); err != nil {
		m.fail(fmt.Errorf("an event is not JSON: %w", err))
		return
	}
	if fields := c.found(); fields != nil {
		grown := m.seen.atLeast(fields.usage())
		if delta := grown.minus(m.seen); delta != (Usage{}) {
			m.credit(delta)
		}
		m.seen = grown
	}
}

// finish reads a JSON body's usage once it has all arrived. A body cut
// short (complete false) is not read.
func (m *usageMeter) finish(complete bool) {
	if m.stream || !complete || m.body.Len() == 0 {
		return
	}
	var c usageCarrier
	if err := json.Unmarshal(m.body.Bytes(), &c); err != nil {
		m.fail(fmt.Errorf("the body is not JSON: %w", err))
		return
	}
	if fields := c.found(); fields != nil {
		m.credit(fields.usage())
	}
	m.body.Reset()
}

// hold counts n more buffered bytes against the memory budget; over it,
// the usage of what is buffered goes unread.
func (m *usageMeter) hold(n int) bool {
	if m.memory == nil || m.memory.use(int64(n)) {
		return true
	}
	m.fail(errors.New("its buffer is over the memory budget of the instance's model calls"))
	return false
}

func (m *usageMeter) unhold(n int) {
	if m.memory != nil {
		m.memory.free(int64(n))
	}
}

// drop forgets a JSON body that will not be read.
func (m *usageMeter) drop() {
	m.unhold(m.body.Len())
	m.body.Reset()
	m.skipping = true
}

// skipLine forgets the SSE line being read, and skips the rest of it.
func (m *usageMeter) skipLine() {
	m.unhold(len(m.line))
	m.skipping, m.line = true, m.line[:0]
}

func (m *usageMeter) fail(err error) {
	if m.problem == nil {
		m.problem = err
	}
}

// Problem says why usage could not be read, if it could not.
func (m *usageMeter) Problem() error { return m.problem }
