package mcpserver

import (
	"context"
	"fmt"
	"time"

	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/proxy"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// Proxy is the host proxy as isx mcp uses it: the command behind it
// starts the proxy when it does not run (a crashed proxy is recovered by
// the next call that needs it).
type Proxy interface {
	// Admit returns once the proxy serves the running instance's current
	// start: its secret written, its socket served.
	Admit(ctx context.Context, instance string) (proxy.Activity, error)
	// Activity is what the proxy counted of the instance.
	Activity(ctx context.Context, instance string) (proxy.Activity, error)
}

var instanceActivityTool = newTool[InstanceArgs, proxy.Activity](mcpkit.Spec{
	Name: "instance_activity", Annotations: readOnly(),
	Description: "What the host proxy counted of an instance's traffic, without running anything in it. A model call in flight (requests_in_flight) means its agent is working; a growing idle_seconds that it is stuck or finished without reporting; traffic_* counts every other request too (package downloads, git, WebSockets), so a build pulling dependencies shows there. Counts run from counting_since: subtract two reads only when both carry the same counting_since (a different or missing one means the proxy restarted and counted afresh).",
})

func (s *Server) addActivityTools() {
	addTool(s, instanceActivityTool, s.instanceActivity)
}

func (s *Server) instanceActivity(ctx context.Context, _ *call, args InstanceArgs) (proxy.Activity, string, error) {
	name := string(args.Instance)
	if _, _, refusal := s.hold.Held(ctx, name); refusal != nil {
		return proxy.Activity{}, "", refusal
	}
	if s.opts.Proxy == nil {
		return proxy.Activity{}, "", refusef(CodeUnavailable, "isx mcp runs without the host proxy, so nothing counts the traffic of %s", name).On(aboutInstance, name)
	}
	activity, err := s.opts.Proxy.Activity(ctx, name)
	if err != nil {
		return proxy.Activity{}, "", refuseWith(CodeUnavailable, err, "the host proxy cannot say what it counted of %s: %v", name, err).On(aboutInstance, name)
	}
	return activity, activityText(activity), nil
}

func activityText(a proxy.Activity) string {
	if !a.Known() {
		return fmt.Sprintf("The host proxy does not know %s yet (it restarted, or the instance has not started since): nothing counted.", a.Instance)
	}
	state := "no model call in flight"
	if a.RequestsInFlight > 0 {
		state = fmt.Sprintf("%d model call(s) in flight: working", a.RequestsInFlight)
	} else if a.IdleSeconds != nil {
		state = fmt.Sprintf("idle for %s since the last model call", time.Duration(*a.IdleSeconds)*time.Second)
	}
	return fmt.Sprintf("%s since %s: %d model call(s), %s; tokens in %d, out %d, cache read %d, cache write %d; traffic %d request(s), %d open, %d bytes sent, %d received.",
		a.Instance, a.CountingSince, a.Requests, state, a.InputTokens, a.OutputTokens, a.CacheReadInputTokens, a.CacheCreationInputTokens,
		a.TrafficRequests, a.TrafficInFlight, a.TrafficBytesSent, a.TrafficBytesReceived)
}

// proxyDir is where new instances' proxy devices lead: none without a
// proxy.
func (s *Server) proxyDir() string {
	if s.opts.Proxy == nil {
		return ""
	}
	return config.ProxyDir(s.opts.Home)
}

// admit has the proxy serve an instance that just became ready. When it
// cannot, the instance is still usable for commands, and the user is
// told why its agents would reach no model.
func (s *Server) admit(ctx context.Context, c *call, name string) {
	if s.opts.Proxy == nil {
		return
	}
	if _, err := s.opts.Proxy.Admit(ctx, name); err != nil {
		s.warnf("the host proxy does not serve %s: %v", name, err)
		c.notes = append(c.notes, fmt.Sprintf("the host proxy does not serve %s, so nothing in it reaches model providers, packages or git: %v", name, err))
	}
}
