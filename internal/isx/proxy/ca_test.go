package proxy_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/proxy/proxytest"
)

// The proxy's CA may vouch only for the names the proxy answers as: the
// hosts it injects credentials into and the .internal names (isx mcp's
// and the host routes'). A leaf its key signs for any other name, or for
// an address, does not verify against it, so a leaked key cannot
// impersonate other hosts inside instances. A CA made before it had
// these constraints is replaced at the proxy's start, and instances then
// trust the new one.
func TestCANameConstraints(t *testing.T) {
	w := newWorld(t, busyboxAccounts)
	old := writeUnconstrainedCA(t, w.proxyDir())
	// A host the proxy only tunnels to, answering with a leaf of the
	// proxy's own CA key: what a leaked key would make.
	var forged atomic.Pointer[tls.Certificate]
	impostor := startImpostor(t, &forged)
	w.upstream("evil.example", "https://"+impostor)
	w.start(w.options(clock.Real{}))

	caPEM, keyPEM := readFile(t, filepath.Join(w.proxyDir(), "ca.pem")), readFile(t, filepath.Join(w.proxyDir(), "ca-key.pem"))
	if caPEM == old {
		t.Fatal("the proxy kept the CA that may sign for any name")
	}
	ca, key := parseCA(t, caPEM, keyPEM)
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, name := range []string{"api.anthropic.com", "api.openai.com", "github.com", "api.github.com", instance.CoordinatorHost, "work.isx.internal"} {
		leaf := signLeaf(t, ca, key, name, nil)
		if _, err := leaf.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: name}); err != nil {
			t.Errorf("a leaf for %s, which the proxy answers as: %v", name, err)
		}
	}
	for _, name := range []string{"evil.example", "api.anthropic.com.evil.example", "example.com", "githubusercontent.com"} {
		leaf := signLeaf(t, ca, key, name, nil)
		_, err := leaf.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: name})
		var invalid x509.CertificateInvalidError
		if !errors.As(err, &invalid) || invalid.Reason != x509.CANotAuthorizedForThisName {
			t.Errorf("a leaf for %s verified against the proxy's CA: %v", name, err)
		}
	}
	address := signLeaf(t, ca, key, "address", net.ParseIP("203.0.113.7"))
	if _, err := address.Leaf.Verify(x509.VerifyOptions{Roots: roots}); err == nil {
		t.Error("a leaf for an IP address verified against the proxy's CA")
	}

	// Inside an instance, which trusts the proxy's CA: the forged leaf is
	// refused, the proxy's own leaves work.
	w.branch("inside", busyboxAccounts, instance.NetworkProxyOnly)
	forged.Store(signLeaf(t, ca, key, "evil.example", nil))
	out, code := w.run("inside", proxytest.ClientPath+" request -url https://evil.example/")
	if code == 0 || strings.Contains(out, "status=200") || !strings.Contains(out, "not authorized to sign for this name") {
		t.Errorf("the instance accepted a forged leaf for evil.example (exit %d):\n%s", code, out)
	}
	if trust := w.mustRun("inside", "cat "+instance.TrustFile); !strings.Contains(trust, strings.TrimSpace(caPEM)) || strings.Contains(trust, strings.TrimSpace(old)) {
		t.Error("the instance does not trust the new CA alone")
	}
	if out := w.mustRun("inside", proxytest.ClientPath+" messages -url https://api.anthropic.com/v1/messages"); !strings.Contains(out, "status=200") {
		t.Errorf("a model call through the proxy's own leaf:\n%s", out)
	}
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func parseCA(t *testing.T, certPEM, keyPEM string) (*x509.Certificate, crypto.Signer) {
	t.Helper()
	certBlock, _ := pem.Decode([]byte(certPEM))
	keyBlock, _ := pem.Decode([]byte(keyPEM))
	if certBlock == nil || keyBlock == nil {
		t.Fatal("the CA files are not PEM")
	}
	cert, err := x509.ParseCertificate(certBlock.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	key, err := x509.ParseECPrivateKey(keyBlock.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// signLeaf is a server certificate for name (and ip, if any) signed by ca.
func signLeaf(t *testing.T, ca *x509.Certificate, caKey crypto.Signer, name string, ip net.IP) *tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{name}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

// writeUnconstrainedCA puts a CA as the proxy made them before name
// constraints into dir, and returns its certificate.
func writeUnconstrainedCA(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "isx host proxy CA", Organization: []string{"isx"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true, IsCA: true, MaxPathLenZero: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	for name, data := range map[string][]byte{"ca.pem": certPEM, "ca-key.pem": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return string(certPEM)
}

// startImpostor serves HTTPS on loopback with whatever leaf cert holds.
func startImpostor(t *testing.T, cert *atomic.Pointer[tls.Certificate]) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			io.WriteString(w, "impostor") //nolint:errcheck // test server
		}),
		TLSConfig: &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := cert.Load(); c != nil {
				return c, nil
			}
			return nil, errors.New("no certificate yet")
		}},
		ReadHeaderTimeout: time.Minute,
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.ServeTLS(l, "", "") //nolint:errcheck // ends at Close
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return l.Addr().String()
}
