package holding

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/task"
)

// Making is a new MCP instance: what it copies and how it is stamped.
type Making struct {
	// From is the Incus instance to copy (a template, or a stopped
	// instance for a fork); Template the template it comes from.
	From, Template string
	// Hint is the middle of its name, mcp-<template>-<hint>-<suffix>.
	Hint string
	// Key is the idempotency key ("" for none); Source what it copies,
	// as stamped (template:<name> or instance:<name>).
	Key, Source string
	Purpose     string
	Caller      string
	// Warm is a warm pool's copy of From to take instead of copying
	// (instance.BranchOptions.Warm); "" copies From.
	Warm string
}

// Make makes the instance, stamped creating and held by this session,
// under a new name, which it returns even when the making failed (Incus
// may have made it before it stopped answering). A keyed creation's
// suffix comes from the owner and key, so two sessions creating with one
// key at once collide on the name in Incus, and the later one gets the
// instance the key made as existing, or busy while the first is still
// making it. The name stays in flight (Held says busy) until Made.
func (h *Holder) Make(ctx context.Context, m Making, reserved *Reservation) (name string, existing *View, err error) {
	stamps := instance.MCPStamps{
		Session: h.Session, Owner: h.Owner, Purpose: m.Purpose, Caller: m.Caller, IdempotencyKey: m.Key,
	}.Config()
	stamps[instance.KeyMCPState] = StateCreating
	stamps[instance.KeyMCPSource] = m.Source
	manager := &instance.Manager{Client: h.Client, Clock: h.Clock, ProxyDir: h.ProxyDir}
	for attempt := range maxAttempts {
		var suffix string
		if m.Key != "" && attempt == 0 {
			suffix = keySuffix(h.Owner, m.Key)
		} else if suffix, err = randomSuffix(h.Random); err != nil {
			return "", nil, err
		}
		name := instanceName(m.Template, m.Hint, suffix)
		reserved.named(name)
		h.inflight.Store(name, true)
		err := manager.Branch(ctx, instance.BranchOptions{Name: name, From: m.From, Owner: h.Owner, Config: stamps, Warm: m.Warm})
		if err == nil {
			return name, nil, nil
		}
		h.inflight.Delete(name)
		if coded.CodeOf(err) != instance.CodeExists {
			return name, nil, err
		}
		if m.Key != "" && attempt == 0 {
			views, listErr := h.Instances(ctx)
			if listErr != nil {
				return "", nil, listErr
			}
			for _, v := range views {
				if v.Stamps.MCP.IdempotencyKey == m.Key {
					return "", &v, nil
				}
			}
			// The key's name is taken by a creation Incus does not list
			// yet: another session is making the key's instance.
			return "", nil, refuse(CodeBusy, name, "idempotency key %q is making instance %s in another session right now; retry shortly", m.Key, name)
		}
	}
	return "", nil, refuse(CodeBusy, "", "no free instance name found for template %s; retry", m.Template)
}

// Made ends the creation of name by this process: Held no longer says it
// is being made by another call.
func (h *Holder) Made(name string) { h.inflight.Delete(name) }

// readyTimeout bounds waiting for a new instance to run and answer.
const readyTimeout = 3 * time.Minute

// Finish waits until the instance runs and answers an exec, clears a
// fork's copied task records, and removes the creating mark. It also
// finishes an instance whose creating call was cut short: Incus goes on
// with a copy its caller no longer waits for.
func (h *Holder) Finish(ctx context.Context, name string, fork bool) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for {
		inst, _, err := h.Client.GetInstance(ctx, name)
		if err != nil {
			return err
		}
		if inst.Running() && h.Answers(ctx, name) {
			break
		}
		if inst.Status == incus.StatusStopped {
			// Fails while the copy is still under way; the next turn
			// tries again.
			_ = h.Client.StartInstance(ctx, name)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-h.Clock.After(250 * time.Millisecond):
		}
	}
	if fork {
		if _, err := task.Clear(ctx, h.Client, name); err != nil {
			return err
		}
	}
	_, err := h.Update(ctx, name, func(v View) (map[string]string, error) {
		if !v.Creating() {
			return nil, nil
		}
		return map[string]string{instance.KeyMCPState: "", instance.KeyMCPRunning: "", instance.KeyMCPTaskKeys: ""}, nil
	})
	return err
}

// Answers reports whether the instance runs a command.
func (h *Holder) Answers(ctx context.Context, name string) bool {
	res, err := h.Client.Exec(ctx, name, incus.ExecRequest{Command: []string{"true"}, Timeout: 10 * time.Second})
	return err == nil && res.ExitCode == 0
}

// abandonTimeout bounds how long a refused creation tries to remove what
// it made while Incus does not answer.
const abandonTimeout = 2 * time.Minute

// Abandon removes an instance whose creation is refused, so that a
// refused create_instance leaves nothing behind. While Incus does not
// answer (a stalled daemon), it tries again until it does.
func (h *Holder) Abandon(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abandonTimeout)
	defer cancel()
	for {
		err := h.Client.DeleteInstance(ctx, name, true)
		if err == nil || errors.Is(err, incus.ErrNotFound) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("removing the unfinished instance %s (the user can with `isx destroy %s`): %w", name, name, err)
		case <-h.Clock.After(500 * time.Millisecond):
		}
	}
}

// MaxInstanceName is Incus's limit on an instance name.
const MaxInstanceName = 63

// instanceName is mcp-<template without tpl->-<hint>-<suffix>, the
// template part shortened to keep within Incus's 63 characters.
func instanceName(tpl, hint, suffix string) string {
	base := strings.TrimPrefix(tpl, "tpl-")
	room := MaxInstanceName - len("mcp-") - len(hint) - len(suffix) - 2
	if len(base) > room {
		base = strings.TrimRight(base[:room], "-")
	}
	return "mcp-" + base + "-" + hint + "-" + suffix
}

var suffixEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// randomSuffix is five random characters of a-z and 2-7.
func randomSuffix(random io.Reader) (string, error) {
	raw := make([]byte, 4)
	if _, err := io.ReadFull(random, raw); err != nil {
		return "", fmt.Errorf("drawing a name suffix: %w", err)
	}
	return strings.ToLower(suffixEncoding.EncodeToString(raw))[:5], nil
}

// keySuffix is five characters of a-z and 2-7 derived from owner and key.
func keySuffix(owner, key string) string {
	sum := sha256.Sum256([]byte(owner + "\x00" + key))
	return strings.ToLower(suffixEncoding.EncodeToString(sum[:4]))[:5]
}
