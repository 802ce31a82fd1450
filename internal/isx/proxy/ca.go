package proxy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/coded"
)

// Lifetimes of the certificates the proxy makes.
const (
	caLifetime   = 10 * 365 * 24 * time.Hour
	leafLifetime = 30 * 24 * time.Hour
	// leafRenewal is how long before its end a leaf is replaced.
	leafRenewal = 7 * 24 * time.Hour
)

// authority is the host-generated CA that instances trust for the hosts
// whose TLS the proxy terminates. Its key never leaves the proxy's
// directory (0600); instances get the certificate only.
type authority struct {
	cert    *x509.Certificate
	certPEM []byte
	key     *ecdsa.PrivateKey
	clock   clock.Clock
	random  io.Reader

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// loadAuthority reads the CA from dir, making one the first time.
func loadAuthority(dir string, clk clock.Clock, random io.Reader) (*authority, error) {
	certPath, keyPath := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
	certPEM, certErr := os.ReadFile(certPath)
	keyPEM, keyErr := os.ReadFile(keyPath)
	if errors.Is(certErr, fs.ErrNotExist) && errors.Is(keyErr, fs.ErrNotExist) {
		return newAuthority(certPath, keyPath, clk, random)
	}
	if err := errors.Join(certErr, keyErr); err != nil {
		return nil, coded.Wrap(CodeState, err, "the proxy's CA in %s cannot be read; remove ca.pem and ca-key.pem there to make a new one (instances trust it from their next start)", dir)
	}
	a, err := parseAuthority(certPEM, keyPEM)
	if err != nil {
		return nil, coded.Wrap(CodeState, err, "the proxy's CA in %s is damaged; remove ca.pem and ca-key.pem there to make a new one", dir)
	}
	if !constrained(a.cert) {
		// Made before the CA was bound to the names it signs for: its key
		// could vouch for any host inside the instances. Instances trust
		// the new one from their next admission.
		return newAuthority(certPath, keyPath, clk, random)
	}
	a.clock, a.random = clk, random
	return a, nil
}

// permittedNames are the only DNS names the CA may sign for: the hosts
// whose credentials the proxy injects, and .internal, under which
// mcp.isx.internal and every host route live (routes change with
// config.yaml; the CA stays). A name constraint covers the name and all
// below it.
func permittedNames() []string {
	names := make([]string, 0, len(injectedHosts)+1)
	for host := range injectedHosts {
		names = append(names, host)
	}
	names = append(names, "internal")
	slices.Sort(names)
	return names
}

// everyAddress excludes every IP address: the CA never signs for one.
var everyAddress = []*net.IPNet{
	{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)},
	{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)},
}

// constrained reports whether the CA carries exactly today's constraints.
func constrained(cert *x509.Certificate) bool {
	got := slices.Clone(cert.PermittedDNSDomains)
	slices.Sort(got)
	return cert.PermittedDNSDomainsCritical && slices.Equal(got, permittedNames()) && len(cert.ExcludedIPRanges) == len(everyAddress)
}

func newAuthority(certPath, keyPath string, clk clock.Clock, random io.Reader) (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), random)
	if err != nil {
		return nil, fmt.Errorf("making the proxy's CA key: %w", err)
	}
	now := clk.Now()
	serial, err := serialNumber(random)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "isx host proxy CA", Organization: []string{"isx"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
		// A leaked key must not impersonate other hosts inside instances.
		PermittedDNSDomainsCritical: true,
		PermittedDNSDomains:         permittedNames(),
		ExcludedIPRanges:            everyAddress,
	}
	der, err := x509.CreateCertificate(random, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("making the proxy's CA: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding the proxy's CA key: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	if err := writePrivate(keyPath, keyPEM); err != nil {
		return nil, err
	}
	if err := writePrivate(certPath, certPEM); err != nil {
		return nil, err
	}
	a, err := parseAuthority(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	a.clock, a.random = clk, random
	return a, nil
}

func parseAuthority(certPEM, keyPEM []byte) (*authority, error) {
	certBlock, _ := pem.Decode(certPEM)
	keyBlock, _ := pem.Decode(keyPEM)
	if certBlock == nil || keyBlock == nil {
		return nil, errors.New("not PEM")
	}
	cert, err := x509.ParseCertificate(certBlock.Bytes)
	if err != nil {
		return nil, err
	}
	key, err := x509.ParseECPrivateKey(keyBlock.Bytes)
	if err != nil {
		return nil, err
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, errors.New("the key does not match the certificate")
	}
	return &authority{cert: cert, certPEM: certPEM, key: key, leaves: map[string]*tls.Certificate{}}, nil
}

func serialNumber(random io.Reader) (*big.Int, error) {
	serial, err := rand128(random)
	if err != nil {
		return nil, fmt.Errorf("making a certificate serial number: %w", err)
	}
	return serial, nil
}

func rand128(random io.Reader) (*big.Int, error) {
	raw := make([]byte, 16)
	if _, err := io.ReadFull(random, raw); err != nil {
		return nil, err
	}
	return new(big.Int).SetBytes(raw), nil
}

// leaf is a certificate for host signed by the CA, made once and kept
// until it nears its end.
func (a *authority) leaf(host string) (*tls.Certificate, error) {
	now := a.clock.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if cert, ok := a.leaves[host]; ok && now.Before(cert.Leaf.NotAfter.Add(-leafRenewal)) {
		return cert, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), a.random)
	if err != nil {
		return nil, fmt.Errorf("making a key for %s: %w", host, err)
	}
	serial, err := serialNumber(a.random)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(leafLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(a.random, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return nil, fmt.Errorf("signing a certificate for %s: %w", host, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	cert := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
	a.leaves[host] = cert
	return cert, nil
}

// writePrivate writes a file only the user can read, atomically.
func writePrivate(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return coded.Wrap(CodeState, err, "cannot write %s", path)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return coded.Wrap(CodeState, err, "cannot write %s", path)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return coded.Wrap(CodeState, err, "cannot write %s", path)
	}
	if err := tmp.Close(); err != nil {
		return coded.Wrap(CodeState, err, "cannot write %s", path)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return coded.Wrap(CodeState, err, "cannot write %s", path)
	}
	return nil
}
