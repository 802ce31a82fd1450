package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/isx/build/buildtest"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/incustest"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/testkit"
)

// Every command's --help is a golden file.
func TestHelp(t *testing.T) {
	x := &cli{t: t, home: t.TempDir()}
	for _, command := range []string{"", "init", "build", "branch", "list", "shell", "destroy", "mcp", "proxy", "tui", "doctor", "version", "completion"} {
		out := x.ok(append(strings.Fields(command), "--help")...).stdout
		name := command
		if name == "" {
			name = "isx"
		}
		testkit.Golden(t, filepath.Join("help", name+".txt"), out)
	}
}

// A command line isx cannot make sense of exits 2, as actiond's do, and
// says how to get help; a failure exits 1.
func TestUsageExitsTwo(t *testing.T) {
	x := &cli{t: t, home: t.TempDir()}
	for name, args := range map[string][]string{
		"build nothing":          {"build"},
		"build names and --all":  {"build", "tpl-dev", "--all"},
		"branch without --from":  {"branch", "w1"},
		"branch two networks":    {"branch", "w1", "--from", "t", "--airgap", "--proxy-only"},
		"branch two names":       {"branch", "w1", "w2", "--from", "t"},
		"destroy nothing":        {"destroy"},
		"unknown command":        {"frobnicate"},
		"unknown flag":           {"list", "--no-such-flag"},
		"unknown shorthand":      {"list", "-z"},
		"flag without its value": {"list", "-o"},
		"list argument":          {"list", "extra"},
		"list format":            {"list", "-o", "yaml"},
		"list two formats":       {"list", "--json", "-o", "wide"},
		"shell nothing":          {"shell"},
		"version argument":       {"version", "now"},
		"doctor argument":        {"doctor", "now"},
		"init argument":          {"init", "now"},
	} {
		r := x.run(args...)
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, "isx: ") || !strings.Contains(r.stderr, "Run `isx --help` for usage.") {
			t.Errorf("%s: %s", name, r)
		}
	}
	x.env = []string{envSocket + "=/nonexistent/unix.socket"}
	if r := x.run("destroy", "w1"); r.code == exitUsage || strings.Contains(r.stderr, "--help") {
		t.Errorf("a failure reads as a usage error: %s", r)
	}
}

// version prints isx's version line (the same as --version) and the Incus
// server's version, socket and project; --json says the same.
func TestVersion(t *testing.T) {
	c := incustest.Project(t)
	x := newCLI(t, c)
	server, err := c.Server(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r := x.ok("version")
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 2 || !regexp.MustCompile(`^isx 0\.1\.0-dev \(([0-9a-f]{12}, \S+(, modified)?|commit unknown: built without VCS information)\) go\d+\.\d+\S* linux/\w+$`).MatchString(lines[0]) {
		t.Fatalf("version:\n%s", r.stdout)
	}
	if want := "Incus " + server.Environment.ServerVersion + " (API " + server.APIVersion + ") on " + c.Socket() + ", project " + c.ProjectName(); lines[1] != want {
		t.Errorf("second line %q, want %q", lines[1], want)
	}
	if flag := x.ok("--version").stdout; flag != lines[0]+"\n" {
		t.Errorf("--version %q differs from version's first line %q", flag, lines[0])
	}
	var report struct {
		Version, Go, Platform string
		Incus                 struct{ Socket, Project, Version, APIVersion, Error string }
	}
	if err := json.Unmarshal([]byte(x.ok("version", "--json").stdout), &report); err != nil {
		t.Fatal(err)
	}
	if report.Version != "0.1.0-dev" || !strings.HasPrefix(report.Go, "go") || report.Incus.Version != server.Environment.ServerVersion ||
		report.Incus.Project != c.ProjectName() || report.Incus.Socket != c.Socket() || report.Incus.Error != "" {
		t.Errorf("version --json: %+v", report)
	}
	x.env = []string{envSocket + "=/nonexistent/unix.socket"}
	r = x.run("version", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &report); err != nil || r.code != exitUnavailable || report.Version != "0.1.0-dev" || !strings.Contains(report.Incus.Error, "points nowhere") {
		t.Errorf("version --json without Incus: %s (%+v)", r, report)
	}
}

// Completion scripts are generated for bash, zsh, fish and PowerShell;
// bash's registers itself; commands, template names, instance names,
// projects and flag values complete, through cobra's __complete and
// through the bash script in bash.
func TestCompletion(t *testing.T) {
	c := incustest.Project(t)
	x := newCLI(t, c)
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		script := x.ok("completion", shell).stdout
		if !strings.Contains(script, "__complete") || !strings.Contains(script, "isx") || len(script) < 500 {
			t.Errorf("%s: script %q", shell, script)
		}
	}
	script := filepath.Join(t.TempDir(), "isx.bash")
	if err := os.WriteFile(script, []byte(x.ok("completion", "bash").stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("bash", "-c", "set -e; source "+script+"; complete -p isx").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "-F __start_isx isx") {
		t.Fatalf("bash: %v %s", err, out)
	}

	buildtest.Build(t, c, buildtest.Templates(t), buildtest.BusyBoxChild)
	x.ok("branch", "w-one", "--from", buildtest.BusyBoxChild)
	x.ok("branch", "w-two", "--from", buildtest.BusyBox, "--airgap")
	stop(t, c, "w-two")
	complete := func(args ...string) []string {
		t.Helper()
		r := x.ok(append([]string{"__complete"}, args...)...)
		if strings.Contains(r.stdout, "warning") || !strings.Contains(r.stdout, ":4\n") {
			t.Errorf("__complete %v: %s", args, r)
		}
		var names []string
		for _, line := range strings.Split(r.stdout, "\n") {
			if name, _, _ := strings.Cut(line, "\t"); line != "" && !strings.HasPrefix(line, ":") {
				names = append(names, name)
			}
		}
		return names
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{""}, "init build branch list shell destroy mcp proxy tui doctor version help completion"},
		{[]string{"build", "tpl-test-b"}, buildtest.BusyBox + " " + buildtest.BusyBoxChild},
		{[]string{"build", buildtest.BusyBox, "tpl-test-busybox"}, buildtest.BusyBoxChild},
		{[]string{"branch", "w-three", "--from", ""}, buildtest.BusyBox + " " + buildtest.BusyBoxChild + " w-one w-two"},
		{[]string{"destroy", ""}, "w-one w-two"},
		{[]string{"destroy", "w-one", ""}, "w-two"},
		{[]string{"destroy", "--template", "tpl"}, buildtest.BusyBox + " " + buildtest.BusyBoxChild},
		{[]string{"shell", "w-t"}, "w-two"},
		{[]string{"shell", "w-one", ""}, ""},
		{[]string{"list", "-o", ""}, "table wide json"},
		{[]string{"init", "--project", c.ProjectName()[:len(c.ProjectName())-1]}, c.ProjectName()},
		{[]string{"list", "--project", c.ProjectName()}, c.ProjectName()},
	} {
		if got := strings.Join(complete(tc.args...), " "); got != tc.want {
			t.Errorf("__complete %q = %q, want %q", tc.args, got, tc.want)
		}
	}
	if r := x.ok("__complete", "shell", "w-t"); !strings.Contains(r.stdout, "w-two\tstopped, from "+buildtest.BusyBox) {
		t.Errorf("an instance's description: %s", r.stdout)
	}
	// The generated bash script itself, in a real bash with Debian's
	// bash-completion, completes as a person's Tab does.
	for line, want := range map[string]string{
		"isx li":                                 "list",
		"isx destroy ":                           "w-one w-two",
		"isx build tpl-test-b":                   buildtest.BusyBox + " " + buildtest.BusyBoxChild,
		"isx branch w-four --from tpl-test-busy": buildtest.BusyBox + " " + buildtest.BusyBoxChild,
		"isx list -o w":                          "wide",
	} {
		if got := bashComplete(t, x, script, line); got != want {
			t.Errorf("bash completes %q to %q, want %q", line, got, want)
		}
	}
	// With Incus down a completion offers nothing and says nothing.
	x.env = []string{envSocket + "=/nonexistent/unix.socket"}
	if got := complete("destroy", ""); len(got) != 0 {
		t.Errorf("without Incus: %v", got)
	}
}

// bashCompletion is where Debian's bash-completion keeps the helpers
// cobra's bash script calls (scripts/install-bash-completion.sh).
const bashCompletion = "/usr/share/bash-completion/bash_completion"

// bashComplete runs the completion script in bash as Tab would on line
// (its last word is the one completed) and returns COMPREPLY, with isx
// the test's binary.
func bashComplete(t *testing.T, x *cli, script, line string) string {
	t.Helper()
	if _, err := os.Stat(bashCompletion); err != nil {
		t.Fatalf("bash-completion is needed (scripts/install-bash-completion.sh installs it): %v", err)
	}
	program := `source ` + bashCompletion + `; source "$1"
COMP_LINE=$2; COMP_POINT=${#COMP_LINE}
read -ra COMP_WORDS <<<"$COMP_LINE"
[[ $COMP_LINE == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
__start_isx isx "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}" 2>/dev/null
printf '%s\n' "${COMPREPLY[@]}"`
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", program, "bash", script, line)
	cmd.Env = append(x.baseEnv(), x.env...)
	cmd.Env = append(cmd.Env, "PATH="+filepath.Dir(isxBinary)+":"+os.Getenv("PATH"))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bash completing %q: %v", line, err)
	}
	return strings.Join(strings.Fields(string(out)), " ")
}

func stop(t *testing.T, c *incus.Client, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.StopInstance(ctx, name, incus.StopOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
}

// isx list's three outputs are golden files: the table, -o wide (network,
// address, age) and --json, over built and unbuilt templates and
// instances running, stopped, of each network mode, and held by isx mcp.
// The tables are all of stdout; the hints go to stderr.
func TestListOutput(t *testing.T) {
	c := incustest.Project(t)
	x := newCLI(t, c)
	buildtest.Build(t, c, buildtest.Templates(t), buildtest.BusyBoxChild)
	x.ok("branch", "w-default", "--from", buildtest.BusyBoxChild)
	x.ok("branch", "w-airgap", "--from", buildtest.BusyBoxChild, "--airgap")
	x.ok("branch", "w-proxied", "--from", buildtest.BusyBox, "--proxy-only")
	x.ok("branch", "w-stopped", "--from", buildtest.BusyBox)
	stop(t, c, "w-stopped")
	owner, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	// Made three and a half hours ago, so that AGE reads 3h whenever the
	// test runs.
	made := instance.FormatTime(time.Now().Add(-3*time.Hour - 30*time.Minute))
	for _, name := range []string{"w-default", "w-airgap", "w-proxied", "w-stopped"} {
		stamp(t, c, name, map[string]string{instance.KeyCreated: made})
	}
	stamp(t, c, "w-airgap", map[string]string{instance.KeyMCPSession: "s1", instance.KeyMCPOwner: owner.Username, instance.KeyMCPPurpose: "#870 implement"})
	// This daemon's default profile has no network, so w-default gets a
	// real NIC with fixed addresses (documentation ranges) for ADDRESS.
	giveAddresses(t, c, "w-default", "192.0.2.7/24", "2001:db8::7/64")
	placeholders := map[string]string{c.ProjectName(): "<project>", made: "<created>", `"owner": "` + owner.Username + `"`: `"owner": "<owner>"`}

	for _, args := range [][]string{{"list"}, {"list", "-o", "wide"}, {"list", "--json"}} {
		r := x.ok(args...)
		name := strings.Join(args, "_")
		if args[len(args)-1] == "--json" {
			var decoded listJSON
			if err := json.Unmarshal([]byte(r.stdout), &decoded); err != nil {
				t.Fatalf("list --json is not JSON: %v\n%s", err, r.stdout)
			}
			name += ".json"
		} else {
			name += ".txt"
		}
		testkit.Golden(t, filepath.Join("list", name), replaceAll(r.stdout, placeholders))
		if strings.Contains(r.stdout, "hint") || strings.Contains(r.stdout, "warning") {
			t.Errorf("isx %s: stdout holds more than the tables:\n%s", strings.Join(args, " "), r.stdout)
		}
	}
	if r := x.ok("list", "-o", "json"); r.stdout != x.ok("list", "--json").stdout {
		t.Error("-o json differs from --json")
	}
}

// giveAddresses adds a point-to-point NIC to a running instance and gives
// it addresses, as DHCP would, so that Incus reports them in its state.
func giveAddresses(t *testing.T, c *incus.Client, name string, addresses ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := c.UpdateInstance(ctx, name, func(inst *incus.Instance) error {
		if inst.Devices == nil {
			inst.Devices = map[string]map[string]string{}
		}
		inst.Devices["eth0"] = map[string]string{"type": "nic", "nictype": "p2p", "name": "eth0"}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	script := "ip link set eth0 up"
	for _, address := range addresses {
		script += " && ip addr add " + address + " dev eth0"
	}
	res, err := c.Exec(ctx, name, incus.ExecRequest{Command: []string{"sh", "-c", script}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("giving %s addresses: %v %q", name, err, res.Stderr)
	}
}

// The ADDRESS column shows an instance's global addresses, IPv4 first,
// none of the loopback's.
func TestAddresses(t *testing.T) {
	inst := &incus.Instance{State: &incus.InstanceState{Network: map[string]incus.NetworkState{
		"lo":   {Addresses: []incus.NetworkAddress{{Family: "inet", Address: "127.0.0.1", Scope: "local"}}},
		"eth0": {Addresses: []incus.NetworkAddress{{Family: "inet6", Address: "fd42::5", Scope: "global"}, {Family: "inet6", Address: "fe80::1", Scope: "link"}, {Family: "inet", Address: "10.0.0.5", Scope: "global"}}},
	}}}
	if got := strings.Join(addresses(inst), ", "); got != "10.0.0.5, fd42::5" {
		t.Errorf("addresses %q", got)
	}
	if got := addresses(&incus.Instance{}); got != nil {
		t.Errorf("a stopped instance's addresses: %v", got)
	}
}

func TestAge(t *testing.T) {
	now := time.Date(2030, 1, 10, 12, 0, 0, 0, time.UTC)
	for d, want := range map[time.Duration]string{42 * time.Second: "42s", 5*time.Minute + 3*time.Second: "5m", 7 * time.Hour: "7h", 47 * time.Hour: "47h", 80 * time.Hour: "3d", -time.Minute: "0s"} {
		if got := age(now.Add(-d), now); got != want {
			t.Errorf("age of %s = %q, want %q", d, got, want)
		}
	}
	if got := age(time.Time{}, now); got != "-" {
		t.Errorf("no creation time: %q", got)
	}
}
