package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/template"
)

// entry is one instance incarnation the proxy serves.
type entry struct {
	name        string
	incarnation string
	secret      string
	template    string
	// accounts are the template's, by kind; none for a project-local
	// build, whose definition nobody vouched for.
	accounts map[string]string
	// projectLocal: built from a project-local definition.
	projectLocal bool
	counters     *counters
	// memory is the budget of this start's model calls.
	memory *budget
	// grant is the coordinator grant as last read for this start.
	grant grantSeen
}

// incarnation tells one start of an instance from another: Incus sets
// last_used_at when it starts an instance, and a copy has its own uuid.
func incarnation(inst *incus.Instance) string {
	return inst.Config["volatile.uuid"] + "@" + inst.LastUsedAt.UTC().Format(time.RFC3339Nano)
}

// socketOf is the host socket the proxy serves the instance on.
func (s *Server) socketOf(name string) string {
	return instance.ProxySocket(s.dir, s.opts.Client.ProjectName(), name)
}

// notServed says why the proxy does not serve inst, or "".
func (s *Server) notServed(inst *incus.Instance) string {
	stamps := instance.ParseStamps(inst.Config)
	switch {
	case stamps.Type != instance.TypeInstance && stamps.Type != instance.TypeBuild:
		return "it is not an instance isx branched or a template isx is building (a built template, or not made by isx)"
	case stamps.Owner != s.opts.Owner:
		return "it belongs to host user " + stamps.Owner + ", not to " + s.opts.Owner
	case stamps.Network == instance.NetworkAirgap:
		return "it is airgapped"
	case !inst.Running():
		return "it is " + strings.ToLower(inst.Status)
	case !instance.ConnectsTo(inst.ExpandedDevices, s.socketOf(inst.Name)):
		return "its " + instance.ProxyDevice + " device does not lead to this proxy's socket for it (made before the proxy existed, or copied outside isx)"
	}
	return ""
}

// learnLock serialises learning one instance.
func (s *Server) learnLock(name string) *sync.Mutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.learning[name]
	if !ok {
		l = &sync.Mutex{}
		s.learning[name] = l
	}
	return l
}

// Admit makes sure the proxy serves the running instance's current
// incarnation: at its first sight of that start it writes the start's
// secret and the CA into the instance, listens on its socket, and starts
// counting. Again for the same start it does nothing. An instance the
// proxy does not serve is CodeNotServed, saying why.
func (s *Server) Admit(ctx context.Context, name string) (Activity, error) {
	lock := s.learnLock(name)
	lock.Lock()
	defer lock.Unlock()
	inst, _, err := s.opts.Client.GetInstance(ctx, name)
	if errors.Is(err, incus.ErrNotFound) {
		return Unknown(name), coded.New(CodeNotServed, "there is no instance %s in project %s", name, s.project())
	}
	if err != nil {
		return Unknown(name), err
	}
	if why := s.notServed(inst); why != "" {
		return Unknown(name), coded.New(CodeNotServed, "the host proxy does not serve %s: %s", name, why)
	}
	inc := incarnation(inst)
	s.mu.Lock()
	current := s.entries[name]
	s.mu.Unlock()
	if current != nil && current.incarnation == inc {
		return s.activityOf(name), nil
	}
	secret, fresh, err := s.secretFor(name, inc)
	if err != nil {
		return Unknown(name), err
	}
	prep := instance.Preparation{Secret: secret, CA: s.ca.certPEM, Profile: profile(), Fresh: fresh}
	if err := instance.Prepare(ctx, s.opts.Client, name, prep); err != nil {
		return Unknown(name), err
	}
	if fresh {
		// Every start puts isx mcp in a coordinator's Claude Code, and
		// takes it out of a copy of one.
		coordinator := instance.Coordinator(inst)
		if _, err := instance.Register(ctx, s.opts.Client, name, coordinator); err != nil {
			s.logProblem(name, "cannot update the Claude Code registration of isx mcp", err)
		}
		if err := instance.SetHosts(ctx, s.opts.Client, name, coordinator); err != nil {
			s.logProblem(name, "cannot name mcp.isx.internal in the instance's /etc/hosts", err)
		}
	}
	if err := s.listen(name); err != nil {
		return Unknown(name), err
	}
	if instance.ConnectsDirect(inst.ExpandedDevices, s.directSocketOf(name)) {
		if err := s.listenDirect(name); err != nil {
			return Unknown(name), err
		}
	}
	stamps := instance.ParseStamps(inst.Config)
	e := &entry{
		name: name, incarnation: inc, secret: secret, template: stamps.Template,
		accounts: s.templateAccounts(name, stamps), projectLocal: stamps.Source == string(template.SourceProjectLocal),
		counters: newCounters(s.opts.Clock.Now(), s.changed), memory: newBudget(s.opts.InstanceMemory),
	}
	s.mu.Lock()
	s.entries[name] = e
	s.mu.Unlock()
	s.changed.ring()
	s.opts.Log.Info("serving instance", "instance", name, "template", e.template, "new_secret", fresh, "accounts", e.accounts)
	return s.activityOf(name), nil
}

// secretFor is the incarnation's secret, recorded before it is written
// into the instance, so that no instance ever holds a secret the proxy
// lost.
func (s *Server) secretFor(name, inc string) (string, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	secret, fresh, err := s.secrets.secretFor(name, inc, s.opts.Random)
	if err != nil {
		return "", false, err
	}
	if fresh {
		if err := s.secrets.save(); err != nil {
			return "", false, err
		}
	}
	return secret, fresh, nil
}

// templateAccounts are the accounts the instance's template names in its
// trusted definition (parents' included).
func (s *Server) templateAccounts(name string, stamps instance.Stamps) map[string]string {
	if stamps.Source == string(template.SourceProjectLocal) {
		s.opts.Log.Info("a project-local build gets no credentials", "instance", name, "template", stamps.Template)
		return nil
	}
	set, err := s.opts.Templates()
	if err != nil {
		s.logProblem(name, "template definitions cannot be read; the instance gets no credentials", err)
		return nil
	}
	chain, err := set.Chain(stamps.Template)
	if err != nil {
		s.logProblem(name, "the instance's template has no trusted definition; it gets no credentials", err)
		return nil
	}
	return template.MergeAccounts(chain)
}

// privateSocket listens on a unix socket at path that only the user can
// reach, in place of whatever an earlier proxy left there.
func privateSocket(path, name string) (net.Listener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, coded.Wrap(CodeState, err, "cannot remove the old socket %s of %s", path, name)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, coded.Wrap(CodeState, err, "cannot listen on %s for %s", path, name)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, coded.Wrap(CodeState, err, "cannot make %s private", path)
	}
	return l, nil
}

// listen serves the instance's socket, once.
func (s *Server) listen(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.listeners[name]; ok {
		return nil
	}
	l, err := privateSocket(s.socketOf(name), name)
	if err != nil {
		return err
	}
	named := &namedListener{Listener: l, name: name, log: s.opts.Log}
	s.listeners[name] = named
	s.work.Go(func() {
		// Serve ends when the listener is closed: at forget or shutdown.
		_ = s.instanceHTTP.Serve(named)
	})
	return nil
}

// forget drops a deleted (or renamed) instance: its socket, its secret
// and its counts.
func (s *Server) forget(name string) {
	s.stopBackend(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.listeners[name]; ok {
		l.Close()
		delete(s.listeners, name)
		os.Remove(s.socketOf(name))
	}
	if l, ok := s.listeners[name+directSuffix]; ok {
		l.Close()
		delete(s.listeners, name+directSuffix)
		os.Remove(s.directSocketOf(name))
	}
	delete(s.entries, name)
	defer s.changed.ring()
	if _, ok := s.secrets.records[name]; ok {
		s.secrets.forget(name)
		if err := s.secrets.save(); err != nil {
			s.logProblem(name, "cannot record that the instance is gone", err)
		}
	}
}

// follow learns the running instances, then those that start, for as
// long as ctx lasts; a broken event stream is opened again.
// It starts with the stream Run opened, if it could.
func (s *Server) follow(ctx context.Context, stream *incus.EventStream) {
	backoff := time.Second
	for ctx.Err() == nil {
		var err error
		if stream == nil {
			if stream, err = s.opts.Client.Events(ctx, incus.EventLifecycle); err == nil {
				s.learnAll(ctx)
			}
		}
		if stream != nil {
			backoff = time.Second
			s.events(ctx, stream)
			err = stream.Err()
			stream = nil
		}
		if ctx.Err() != nil {
			return
		}
		s.opts.Log.Warn("the Incus event stream broke; opening it again", "error", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-s.opts.Clock.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// learnAll admits every running instance the proxy serves.
func (s *Server) learnAll(ctx context.Context) {
	list, err := s.opts.Client.Instances(ctx)
	if err != nil {
		s.opts.Log.Warn("cannot list the instances to serve", "error", err)
		return
	}
	var wg sync.WaitGroup
	limit := make(chan struct{}, 4)
	for i := range list {
		inst := &list[i]
		if s.notServed(inst) != "" {
			continue
		}
		wg.Go(func() {
			limit <- struct{}{}
			defer func() { <-limit }()
			if _, err := s.Admit(ctx, inst.Name); err != nil {
				s.logProblem(inst.Name, "cannot serve the instance", err)
			}
		})
	}
	wg.Wait()
}

func (s *Server) events(ctx context.Context, stream *incus.EventStream) {
	for event := range stream.Events {
		l, err := event.Lifecycle()
		if err != nil {
			continue
		}
		name := l.Instance()
		if name == "" {
			continue
		}
		switch l.Action {
		case "instance-started", "instance-restarted":
			s.work.Go(func() {
				if _, err := s.Admit(ctx, name); err != nil && coded.CodeOf(err) != CodeNotServed {
					s.logProblem(name, "cannot serve the instance that started", err)
				}
			})
		case "instance-updated":
			// The grant may have been withdrawn: the next request reads
			// Incus again rather than trust what it said within grantFresh.
			if e := s.current(name); e != nil {
				e.grant.stale()
			}
		case "instance-deleted":
			s.forget(name)
		case "instance-renamed":
			if old, ok := l.Context["old_name"].(string); ok {
				s.forget(old)
			}
			s.forget(name)
		}
	}
}

// maxConnections bounds the connections one instance holds open at once,
// so that no instance can use up what the proxy serves every other with.
const maxConnections = 512

// namedListener marks each connection with the instance whose socket it
// came in on, and refuses connections beyond maxConnections.
type namedListener struct {
	net.Listener
	name   string
	log    *slog.Logger
	active atomic.Int64
}

func (l *namedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.active.Add(1) > maxConnections {
			l.active.Add(-1)
			l.log.Warn("refused a connection beyond the instance's limit", "instance", l.name, "limit", maxConnections)
			c.Close()
			continue
		}
		return &namedConn{Conn: c, name: l.name, l: l}, nil
	}
}

type namedConn struct {
	net.Conn
	name   string
	l      *namedListener
	closed sync.Once
}

func (c *namedConn) Close() error {
	c.closed.Do(func() { c.l.active.Add(-1) })
	return c.Conn.Close()
}

type linkKey struct{}

// linkContext puts the name of the connection's instance in its context.
func linkContext(ctx context.Context, c net.Conn) context.Context {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	if n, ok := c.(*namedConn); ok {
		return context.WithValue(ctx, linkKey{}, n.name)
	}
	return ctx
}

// linkOf is the instance the request came from, by its socket.
func linkOf(ctx context.Context) string {
	name, _ := ctx.Value(linkKey{}).(string)
	return name
}

// current is the entry serving the instance now.
func (s *Server) current(name string) *entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.entries[name]
}
