package proxy

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/template"
)

// An update of the instance on Incus's event stream ends the proxy's trust
// in the coordinator grant it read within grantFresh, so a withdrawn grant
// is refused at the next request rather than up to two seconds later.
// (cmd/isx's TestCoordinatorGrantCheckedOnEveryRequest withdraws a real
// grant through Incus; this is the seam beside it.)
func TestAnUpdateEndsTrustInTheGrant(t *testing.T) {
	home := t.TempDir()
	s, err := New(Options{Home: home, Client: incus.New(filepath.Join(home, "no-incus.sock")), Owner: "grant",
		Templates: func() (*template.Set, error) { return template.NewSet() },
		Log:       slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	coord, other := &entry{name: "coord"}, &entry{name: "other"}
	s.entries["coord"], s.entries["other"] = coord, other
	now := time.Now()
	coord.grant.saw(true, now)
	other.grant.saw(true, now)
	events := make(chan incus.Event, 1)
	events <- incus.Event{Type: incus.EventLifecycle, Metadata: json.RawMessage(`{"action":"instance-updated","source":"/1.0/instances/coord"}`)}
	close(events)
	s.events(context.Background(), &incus.EventStream{Events: events})
	if _, fresh := coord.grant.seen(now); fresh {
		t.Error("the grant of the updated instance is still trusted")
	}
	if ok, fresh := other.grant.seen(now); !ok || !fresh {
		t.Error("another instance's grant was forgotten")
	}
}
