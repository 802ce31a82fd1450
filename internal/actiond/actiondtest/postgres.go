package actiondtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// Postgres is a Postgres server of a test's own, on loopback, for tests
// that stop and start the database under load: the shared test database
// must not be restarted under the tests of others.
type Postgres struct {
	T    testing.TB
	DSN  string
	port string
	data string
	bin  string
}

// PrivatePostgres initializes and starts a Postgres in a temporary
// directory; it is stopped and removed at the end of the test. It needs the
// Debian postgresql package (scripts/postgres-up.sh installs it).
func PrivatePostgres(t testing.TB) *Postgres {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	if len(bins) == 0 {
		t.Fatal("no Postgres binaries in /usr/lib/postgresql/*/bin: run scripts/postgres-up.sh, which installs them")
	}
	sort.Strings(bins)
	dir, err := os.MkdirTemp("", "actiond-pg-")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(FreeAddr(t))
	p := &Postgres{T: t, port: port, data: filepath.Join(dir, "data"), bin: bins[len(bins)-1],
		DSN: fmt.Sprintf("postgres://postgres@127.0.0.1:%s/postgres?sslmode=disable", port)}
	t.Cleanup(func() {
		p.run("pg_ctl", "-D", p.data, "-m", "immediate", "stop")
		os.RemoveAll(dir)
	})
	if os.Geteuid() == 0 {
		// Postgres refuses to run as root: its files are the postgres user's.
		if out, err := exec.Command("chown", "postgres:", dir).CombinedOutput(); err != nil {
			t.Fatalf("chown %s: %v %s", dir, err, out)
		}
	}
	if out, err := p.run("initdb", "-D", p.data, "-U", "postgres", "--auth=trust", "-E", "UTF8"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	p.Start()
	return p
}

func (p *Postgres) run(tool string, args ...string) ([]byte, error) {
	command := append([]string{filepath.Join(p.bin, tool)}, args...)
	if os.Geteuid() == 0 {
		command = append([]string{"runuser", "-u", "postgres", "--"}, command...)
	}
	return exec.Command(command[0], command[1:]...).CombinedOutput()
}

// Start starts the server and waits until it accepts connections.
func (p *Postgres) Start() {
	p.T.Helper()
	out, err := p.run("pg_ctl", "-D", p.data, "-l", filepath.Join(filepath.Dir(p.data), "server.log"), "-w",
		"-o", "-p "+p.port+" -k "+filepath.Dir(p.data)+" -c listen_addresses=127.0.0.1 -c max_connections=200", "start")
	if err != nil {
		p.T.Fatalf("start Postgres: %v\n%s", err, out)
	}
}

// Stop stops the server at once, as a crash or a restart would: every
// connection is cut.
func (p *Postgres) Stop() {
	p.T.Helper()
	if out, err := p.run("pg_ctl", "-D", p.data, "-m", "immediate", "-w", "stop"); err != nil && !strings.Contains(string(out), "not running") {
		p.T.Fatalf("stop Postgres: %v\n%s", err, out)
	}
}
