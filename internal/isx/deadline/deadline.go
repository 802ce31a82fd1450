// Package deadline keeps a slow client from holding a connection of an
// isx HTTP server forever: the host proxy's listeners, its control socket
// and the coordinators' isx mcp. A server's own timeouts bound the wait
// for a request's headers and for the next request on a kept-alive
// connection; Guard adds, per request, a body that must keep moving and
// writes that the client must keep taking. A fixed deadline for the whole
// request would cut the streams these servers live on (a model call's
// answer, a download, a WebSocket, a tunnel), so nothing here bounds how
// long a request lasts, only how long it may stand still.
//
// The deadlines are the kernel's, on the wall clock: a test's fake clock
// cannot move them, so tests give short Limits instead.
package deadline

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/incusspawn/isx/internal/coded"
)

// Limits are how long a client may keep a connection standing still.
type Limits struct {
	// Header is how long a request's headers may take to arrive.
	Header time.Duration
	// Idle is how long a kept-alive connection may wait for its next
	// request.
	Idle time.Duration
	// Window and Progress: a request body must bring Progress bytes, or
	// end, within every Window. A body sent a byte at a time is cut.
	Window   time.Duration
	Progress int64
	// Write is how long one write of the response may wait for the
	// client to take it: a client that stops reading is cut.
	Write time.Duration
}

// Defaults are generous for anything a person or an agent does, and
// still end a connection that stands still.
func Defaults() Limits {
	return Limits{Header: time.Minute, Idle: 5 * time.Minute, Window: time.Minute, Progress: 4 << 10, Write: 5 * time.Minute}
}

// OrDefaults fills what is zero from Defaults.
func (l Limits) OrDefaults() Limits {
	d := Defaults()
	if l.Header <= 0 {
		l.Header = d.Header
	}
	if l.Idle <= 0 {
		l.Idle = d.Idle
	}
	if l.Window <= 0 {
		l.Window = d.Window
	}
	if l.Progress <= 0 {
		l.Progress = d.Progress
	}
	if l.Write <= 0 {
		l.Write = d.Write
	}
	return l
}

// Apply sets the server's own timeouts from the limits and guards its
// handler.
func (l Limits) Apply(srv *http.Server) {
	l = l.OrDefaults()
	srv.ReadHeaderTimeout = l.Header
	srv.IdleTimeout = l.Idle
	srv.Handler = Guard(srv.Handler, l)
}

// Guard wraps h so that each request's body must keep moving and each
// write of its response must be taken in time. A request that takes its
// connection over (CONNECT, a protocol upgrade) gets no deadline: its
// handler owns the connection and its limits from then on.
func Guard(h http.Handler, l Limits) http.Handler {
	l = l.OrDefaults()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if r.Method == http.MethodConnect || upgrading(r) {
			// A deadline left from an earlier request on this connection
			// would cut the stream.
			rc.SetReadDeadline(time.Time{})  //nolint:errcheck // a writer without deadlines has none to clear
			rc.SetWriteDeadline(time.Time{}) //nolint:errcheck // as above
			h.ServeHTTP(w, r)
			return
		}
		now := time.Now()
		rc.SetWriteDeadline(now.Add(l.Write)) //nolint:errcheck // a writer without deadlines cannot be guarded
		if r.Body != nil && r.Body != http.NoBody {
			b := &body{ReadCloser: r.Body, rc: rc, limits: l}
			b.extend(now)
			r = r.WithContext(context.WithValue(r.Context(), cutKey{}, &b.cut))
			r.Body = b
		}
		// What the server writes once the handler returns (headers not yet
		// sent, the end of a chunked body) gets its own time, however long
		// the handler took.
		defer rc.SetWriteDeadline(time.Now().Add(l.Write)) //nolint:errcheck // as above
		h.ServeHTTP(&writer{ResponseWriter: w, rc: rc, limits: l}, r)
	})
}

// upgrading reports whether the request asks to switch protocols.
func upgrading(r *http.Request) bool {
	for _, v := range r.Header.Values("Connection") {
		for _, token := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(token), "upgrade") {
				return true
			}
		}
	}
	return false
}

// CodeTooSlow is the code of a body cut for standing still.
const CodeTooSlow = "body_too_slow"

// ErrTooSlow is what reading a body that stood still returns (wrapped):
// a handler answers 408 and the connection ends. It matches any error of
// its code.
var ErrTooSlow error = &coded.Error{Code: CodeTooSlow, Message: "the request's body stopped coming, or came too slowly"}

// TooSlow reports whether err is a body cut for standing still.
func TooSlow(err error) bool { return errors.Is(err, ErrTooSlow) }

type cutKey struct{}

// Cut reports whether the body of the request of ctx was cut for
// standing still. Whoever read it (a transport sending it on) may have
// reported something else: the server cancels the request's context as
// soon as its connection fails.
func Cut(ctx context.Context) bool {
	cut, _ := ctx.Value(cutKey{}).(*atomic.Bool)
	return cut != nil && cut.Load()
}

// body is a request body whose read deadline moves on with every
// Progress bytes, and is lifted once it has ended: the server then reads
// the connection to see whether the client went away, and a deadline
// there would end a long response.
type body struct {
	io.ReadCloser
	rc     *http.ResponseController
	limits Limits
	moved  int64
	ended  bool
	cut    atomic.Bool
}

func (b *body) extend(now time.Time) {
	b.rc.SetReadDeadline(now.Add(b.limits.Window)) //nolint:errcheck // a writer without deadlines cannot be guarded
}

func (b *body) Read(p []byte) (int, error) {
	if b.ended {
		return b.ReadCloser.Read(p)
	}
	n, err := b.ReadCloser.Read(p)
	b.moved += int64(n)
	switch {
	case errors.Is(err, io.EOF):
		b.ended = true
		b.rc.SetReadDeadline(time.Time{}) //nolint:errcheck // as in extend
	case err != nil && timedOut(err):
		b.cut.Store(true)
		return n, tooSlow(err)
	case b.moved >= b.limits.Progress:
		b.moved = 0
		b.extend(time.Now())
	}
	return n, err
}

func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

func tooSlow(err error) error {
	return coded.Wrap(CodeTooSlow, err, "%s", ErrTooSlow.Error())
}

// writer moves the write deadline on before every write: a stream may
// last for hours, but each piece of it must be taken within Write.
type writer struct {
	http.ResponseWriter
	rc     *http.ResponseController
	limits Limits
}

func (w *writer) Write(p []byte) (int, error) {
	w.rc.SetWriteDeadline(time.Now().Add(w.limits.Write)) //nolint:errcheck // as in Guard
	return w.ResponseWriter.Write(p)
}

func (w *writer) WriteHeader(status int) {
	w.rc.SetWriteDeadline(time.Now().Add(w.limits.Write)) //nolint:errcheck // as in Guard
	w.ResponseWriter.WriteHeader(status)
}

func (w *writer) Flush() {
	w.rc.SetWriteDeadline(time.Now().Add(w.limits.Write)) //nolint:errcheck // as in Guard
	w.rc.Flush()                                          //nolint:errcheck // a failed flush shows at the next write
}

func (w *writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Quiet ends a pair of connections taken over from an HTTP server (a
// tunnel) once nothing has crossed it, either way, for its idle time:
// each side is read through Reader, which moves the read deadline on
// while either side moves, and ends with ErrIdle once neither has.
type Quiet struct {
	idle  time.Duration
	last  atomic.Int64 // unix nanoseconds of the last crossing
	until atomic.Int64 // unix nanoseconds after which reads end; 0: never
}

// ErrIdle ends a read of a Quiet pair that stood still too long.
var ErrIdle = errors.New("nothing crossed the connection either way for too long")

// NewQuiet starts a pair's quiet time now.
func NewQuiet(idle time.Duration) *Quiet {
	q := &Quiet{idle: idle}
	q.last.Store(time.Now().UnixNano())
	return q
}

// Finish makes every read end by within from now, moving or not: what
// is left once one side has finished.
func (q *Quiet) Finish(within time.Duration) {
	q.until.Store(time.Now().Add(within).UnixNano())
}

// Reader reads src, which reads conn (src may hold what was read of conn
// already), marking each crossing.
func (q *Quiet) Reader(src io.Reader, conn net.Conn) io.Reader {
	return &quietReader{q: q, src: src, conn: conn}
}

type quietReader struct {
	q    *Quiet
	src  io.Reader
	conn net.Conn
}

func (r *quietReader) Read(p []byte) (int, error) {
	for {
		deadline := time.Unix(0, r.q.last.Load()).Add(r.q.idle)
		if until := r.q.until.Load(); until != 0 && time.Unix(0, until).Before(deadline) {
			deadline = time.Unix(0, until)
		}
		r.conn.SetReadDeadline(deadline) //nolint:errcheck // a conn without deadlines just waits
		n, err := r.src.Read(p)
		now := time.Now()
		if n > 0 {
			r.q.last.Store(now.UnixNano())
		}
		if err == nil || !timedOut(err) || n > 0 {
			return n, err
		}
		if until := r.q.until.Load(); until != 0 && now.UnixNano() >= until {
			return 0, err
		}
		if now.Sub(time.Unix(0, r.q.last.Load())) >= r.q.idle {
			return 0, ErrIdle
		}
		// The other side moved meanwhile: this one may wait on.
	}
}
