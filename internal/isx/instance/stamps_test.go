package instance

import (
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/template"
)

func TestStampsRoundTrip(t *testing.T) {
	created := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	s := Stamps{
		Type: TypeInstance, Template: "tpl-dev", DefinitionHash: "abc", Version: "0.1.0", Source: "user",
		Owner: "alice", Created: created, Network: NetworkAirgap, ToolsJSON: `[{"name":"claude"}]`,
		MCP: MCPStamps{Session: "s1", Owner: "alice", Purpose: "#870 implement", IdempotencyKey: "k", Caller: "c", Dormant: "d", Kept: "x", Orphaned: "o"},
	}
	config := s.Config()
	if len(config) != 17 || config[KeyCreated] != "2030-01-02T03:04:05Z" || config[KeyMCPPurpose] != "#870 implement" {
		t.Errorf("Config() = %v", config)
	}
	if got := ParseStamps(config); got != s {
		t.Errorf("ParseStamps(Config()) = %+v, want %+v", got, s)
	}
	if ParseStamps(map[string]string{KeyCreated: "yesterday"}).Created != (time.Time{}) {
		t.Errorf("a malformed time must read as zero")
	}
	if len((Stamps{}).Config()) != 0 {
		t.Errorf("empty stamps produce keys")
	}
	if !(Stamps{Type: TypeBase}).IsTemplate() || !(Stamps{Type: TypeBase}).Managed() || (Stamps{Type: "other"}).Managed() {
		t.Errorf("Managed/IsTemplate")
	}
}

// ISX-045, ISX-046, ISX-047: the MCP column's words.
func TestMCPLabel(t *testing.T) {
	cases := []struct {
		stamps MCPStamps
		want   string
	}{
		{MCPStamps{}, ""},
		{MCPStamps{Session: "s", Purpose: "#870 implement"}, "held: #870 implement"},
		{MCPStamps{Session: "s"}, "held"},
		{MCPStamps{Session: "s", Purpose: "p", Orphaned: "2030-01-01T00:00:00Z s"}, "orphaned"},
		{MCPStamps{Session: "s", Purpose: "spike", Kept: "2030-01-01T00:00:00Z"}, "kept: spike"},
		{MCPStamps{Purpose: "spike", Kept: "yes", Orphaned: "2030-01-01T00:00:00Z s"}, "kept: spike"},
		{MCPStamps{Owner: "alice"}, ""},
	}
	for _, c := range cases {
		if got := c.stamps.Label(); got != c.want {
			t.Errorf("%+v: Label() = %q, want %q", c.stamps, got, c.want)
		}
	}
	if !(MCPStamps{Owner: "alice"}).Any() || (MCPStamps{}).Any() {
		t.Errorf("Any()")
	}
}

func TestOrphanedValue(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	m := MCPStamps{Orphaned: OrphanedValue(at, "pid-42-1700000000")}
	if m.Orphaned != "2030-01-02T02:04:05Z pid-42-1700000000" {
		t.Errorf("OrphanedValue = %q", m.Orphaned)
	}
	when, session, ok := m.OrphanedAt()
	if !ok || !when.Equal(at) || session != "pid-42-1700000000" {
		t.Errorf("OrphanedAt = %v %q %v", when, session, ok)
	}
	for _, bad := range []string{"", "2030-01-02T02:04:05Z", "soon s"} {
		if _, _, ok := (MCPStamps{Orphaned: bad}).OrphanedAt(); ok {
			t.Errorf("OrphanedAt(%q) accepted", bad)
		}
	}
}

func TestClearMCP(t *testing.T) {
	config := map[string]string{KeyType: TypeInstance, KeyMCPSession: "s", KeyMCPKept: "k", "user.other": "x"}
	want := map[string]string{KeyMCPSession: "", KeyMCPKept: ""}
	if got := ClearMCP(config); !maps.Equal(got, want) {
		t.Errorf("ClearMCP = %v", got)
	}
}

func TestToolsStamp(t *testing.T) {
	tools := ToolsOf([]template.Tool{
		{Name: "claude", Model: "sonnet", Workdir: "work", AgentNote: "note", Repos: []template.Repo{{URL: "https://example.invalid/r.git", Path: "src/r"}}},
		{Name: "codex"},
	})
	encoded, err := EncodeTools(tools)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"name":"claude","model":"sonnet","repos":[{"url":"https://example.invalid/r.git","path":"src/r"}],"workdir":"work","agent_note":"note"},{"name":"codex"}]`
	if encoded != want {
		t.Errorf("EncodeTools = %s", encoded)
	}
	decoded, err := Stamps{ToolsJSON: encoded}.Tools()
	if err != nil || len(decoded) != 2 || decoded[0].Repos[0].Path != "src/r" || decoded[1].Name != "codex" {
		t.Errorf("Tools() = %+v, %v", decoded, err)
	}
	if none, err := EncodeTools(nil); none != "" || err != nil {
		t.Errorf("EncodeTools(nil) = %q, %v", none, err)
	}
	if _, err := (Stamps{ToolsJSON: "{"}).Tools(); err == nil {
		t.Errorf("malformed tools stamp accepted")
	}
}

// Airgap and proxy-only mask every NIC; default and proxy-only get the
// device to the host proxy (when there is one), airgap never does, and
// an airgapped copy of an instance loses its source's.
func TestNetworkDevices(t *testing.T) {
	inherited := map[string]map[string]string{
		"root": {"type": "disk", "path": "/"},
		"eth0": {"type": "nic", "network": "incusbr0"},
		"eth1": {"type": "nic", "nictype": "p2p"},
	}
	const dir = "/home/u/.local/state/incus-spawn/proxy"
	socket := ProxySocket(dir, "p", "x")
	for _, mode := range []Network{NetworkAirgap, NetworkProxyOnly} {
		devices, err := networkDevices(mode, dir, "p", "x", inherited)
		if err != nil {
			t.Fatal(err)
		}
		if devices["eth0"]["type"] != "none" || devices["eth1"]["type"] != "none" {
			t.Errorf("%s: NICs not masked: %v", mode, devices)
		}
		if got := ConnectsTo(devices, socket); got != (mode == NetworkProxyOnly) {
			t.Errorf("%s: proxy device %v", mode, devices[ProxyDevice])
		}
	}
	devices, err := networkDevices(NetworkDefault, dir, "p", "x", inherited)
	if err != nil || len(devices) != 1 || !ConnectsTo(devices, socket) {
		t.Errorf("default network: devices %v, %v", devices, err)
	}
	if devices, _ := networkDevices(NetworkDefault, "", "p", "x", inherited); devices != nil {
		t.Errorf("default network without a proxy changes devices: %v", devices)
	}
	copied := map[string]map[string]string{ProxyDevice: {"type": "proxy", "connect": "unix:" + ProxySocket(dir, "p", "source")}}
	if devices, _ := networkDevices(NetworkAirgap, dir, "p", "x", copied); devices[ProxyDevice]["type"] != "none" {
		t.Errorf("an airgapped copy keeps its source's proxy device: %v", devices)
	}
	if devices, _ := networkDevices(NetworkDefault, dir, "p", "x", copied); !ConnectsTo(devices, socket) {
		t.Errorf("a copy's proxy device leads to its source's socket: %v", devices)
	}
	if _, err := networkDevices(NetworkDefault, "/"+strings.Repeat("d", 100), "p", "x", nil); coded.CodeOf(err) != CodeInvalid {
		t.Errorf("a socket path too long for a socket address: %v", err)
	}
	if ProxySocket(dir, "p", "x") == ProxySocket(dir, "q", "x") || ProxySocket(dir, "", "x") != ProxySocket(dir, "default", "x") {
		t.Error("the socket does not name project and instance")
	}
	if _, err := ParseNetwork("wifi"); coded.CodeOf(err) != CodeInvalid {
		t.Errorf("ParseNetwork(wifi) = %v", err)
	}
	if n, err := ParseNetwork(""); n != NetworkDefault || err != nil {
		t.Errorf("ParseNetwork(\"\") = %q, %v", n, err)
	}
}

// Every key isx mcp writes is read into MCPStamps, written back by Config,
// and starts with MCPPrefix, so that ClearMCP drops it from a fork.
func TestEveryMCPKeyRoundTrips(t *testing.T) {
	keys := []string{KeyMCPSession, KeyMCPOwner, KeyMCPPurpose, KeyMCPOrphaned, KeyMCPKept, KeyMCPIdempotencyKey,
		KeyMCPCaller, KeyMCPDormant, KeyMCPState, KeyMCPSource, KeyMCPRunning, KeyMCPTaskKeys}
	config := map[string]string{}
	for i, key := range keys {
		if !strings.HasPrefix(key, MCPPrefix) {
			t.Errorf("%s does not start with %s", key, MCPPrefix)
		}
		config[key] = "v" + strconv.Itoa(i)
	}
	if got := ParseStamps(config).MCP.Config(); !maps.Equal(got, config) {
		t.Errorf("round trip = %v, want %v", got, config)
	}
	if got := ClearMCP(config); len(got) != len(keys) {
		t.Errorf("ClearMCP clears %d of %d keys", len(got), len(keys))
	}
}
