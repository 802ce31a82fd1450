package holding

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/incusspawn/isx/internal/isx/config"
)

// max-instances counts every MCP instance of the host user, in every
// session. Creations run concurrently, so the instances Incus lists are
// not all there is: a creation is counted from the moment it is allowed
// until Incus lists its instance, by a reservation file that every isx mcp
// of the user reads. Only the count and the writing of the reservation
// are done under one lock (a flock shared by all of the user's isx mcp
// processes), never the copy itself, so creations of one session or of
// several run at once and the limit stays exact.

// ReservationsDir holds one file per creation under way: its first line
// is the session making it, its second the instance name once chosen.
func ReservationsDir(home string) string {
	return filepath.Join(config.StateDir(home), "mcp-creating")
}

// Reservation is one creation under way, counted against max-instances.
type Reservation struct {
	path string
	h    *Holder
}

// ReserveInstance counts the host user's MCP instances with the
// creations under way in every session and, below limit, reserves a place
// for one more. The instances are read under the lock, so that a creation
// that finished since the caller looked is not counted twice; they are
// returned with the reservation.
func (h *Holder) ReserveInstance(ctx context.Context, limit int) (*Reservation, []View, error) {
	dir := ReservationsDir(h.Home)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, refuseWith(CodeInternal, "", err, "isx cannot keep count of the instances being made: %v", err)
	}
	unlock, err := lockFile(filepath.Join(dir, "lock"))
	if err != nil {
		return nil, nil, refuseWith(CodeInternal, "", err, "isx cannot keep count of the instances being made: %v", err)
	}
	defer unlock()
	views, err := h.Instances(ctx)
	if err != nil {
		return nil, nil, err
	}
	listed := map[string]bool{}
	for _, v := range views {
		listed[v.Inst.Name] = true
	}
	count := len(views)
	for _, r := range liveReservations(dir) {
		if r.name == "" || !listed[r.name] {
			count++
		}
	}
	if count >= limit {
		return nil, views, refuse(CodeLimit, "", "host user %s already has %d MCP instances and mcp.yaml allows %d (max-instances, counted across sessions, kept and orphaned ones and those being made included); destroy_instance one you no longer need, or ask the user to raise the limit or destroy kept ones with isx destroy",
			h.Owner, count, limit)
	}
	token, err := randomSuffix(h.Random)
	if err != nil {
		return nil, views, refuseWith(CodeInternal, "", err, "drawing a reservation name: %v", err)
	}
	r := &Reservation{path: filepath.Join(dir, "r-"+token+"-"+fmt.Sprint(os.Getpid())), h: h}
	if err := os.WriteFile(r.path, []byte(h.Session+"\n"), 0o600); err != nil {
		return nil, views, refuseWith(CodeInternal, "", err, "isx cannot keep count of the instances being made: %v", err)
	}
	return r, views, nil
}

// named records the instance name the creation chose, so that the count
// does not take it twice once Incus lists it.
func (r *Reservation) named(name string) {
	if err := os.WriteFile(r.path, []byte(r.h.Session+"\n"+name+"\n"), 0o600); err != nil {
		r.h.warnf("recording the name of a reserved instance: %v", err)
	}
}

// Release ends the reservation: the instance is listed by Incus, or was
// not made.
func (r *Reservation) Release() {
	if err := os.Remove(r.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		r.h.warnf("removing a reservation: %v", err)
	}
}

type reserved struct{ session, name string }

// liveReservations reads the reservations of sessions that still run,
// removing those of sessions that died.
func liveReservations(dir string) []reserved {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []reserved
	for _, entry := range entries {
		if !strings.HasPrefix(entry.Name(), "r-") {
			continue
		}
		path := filepath.Join(dir, entry.Name())
		raw, err := readSmall(path)
		if err != nil {
			continue
		}
		session, name, _ := strings.Cut(strings.TrimSpace(raw), "\n")
		if !SessionAlive(session) {
			os.Remove(path)
			continue
		}
		out = append(out, reserved{session: session, name: strings.TrimSpace(name)})
	}
	return out
}

func readSmall(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, 1024))
	return string(raw), err
}

// lockFile takes an exclusive flock on path and returns its release.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}
