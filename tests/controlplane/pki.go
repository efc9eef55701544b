package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki holds the certificates and keys of one control plane, PEM-encoded.
// The CA signs the apiserver's serving certificate and the admin's client
// certificate; the service-account key pair signs and verifies tokens.
type pki struct {
	caCert, caKey           []byte
	servingCert, servingKey []byte
	adminCert, adminKey     []byte
	saKey, saPub            []byte

	ca       *x509.Certificate // for issuing further certificates
	caSigner crypto.Signer
}

const certValidity = 7 * 24 * time.Hour

// newPKI makes a CA and the certificates of one control plane; extraIPs are
// further addresses the apiserver's serving certificate names (a node's).
func newPKI(extraIPs ...net.IP) (*pki, error) {
	p := &pki{}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "kubelease-test-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	p.ca, p.caSigner = ca, caKey
	p.caCert = pemBlock("CERTIFICATE", caDER)
	if p.caKey, err = pemKey(caKey); err != nil {
		return nil, err
	}

	ips := append([]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(serviceIP)}, extraIPs...)
	dns := []string{"localhost", "kubernetes", "kubernetes.default",
		"kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
	if p.servingCert, p.servingKey, err = p.issueServing("kube-apiserver", ips, dns); err != nil {
		return nil, err
	}

	if p.adminCert, p.adminKey, err = p.issueClient("kubelease-admin", "system:masters"); err != nil {
		return nil, err
	}

	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	if p.saKey, err = pemKey(saKey); err != nil {
		return nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	p.saPub = pemBlock("PUBLIC KEY", pubDER)
	return p, nil
}

// issueClient returns a client certificate of the user cn in the groups orgs
// and its key, signed by the CA.
func (p *pki) issueClient(cn string, orgs ...string) (certPEM, keyPEM []byte, err error) {
	now := time.Now()
	return issue(&x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, p.ca, p.caSigner)
}

// issueServing returns a serving certificate for the addresses ips and the
// names dns, and its key, signed by the CA.
func (p *pki) issueServing(cn string, ips []net.IP, dns []string) (certPEM, keyPEM []byte, err error) {
	now := time.Now()
	return issue(&x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     dns,
		IPAddresses:  ips,
	}, p.ca, p.caSigner)
}

// issue signs tmpl with the CA and returns the certificate and a fresh key.
func issue(tmpl, ca *x509.Certificate, caKey crypto.Signer) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = pemKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pemBlock("CERTIFICATE", der), keyPEM, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n.Add(n, big.NewInt(1))
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// pemKey encodes a private key as PKCS#8, which every consumer here (Go's
// crypto/tls, the apiserver's key loader, OpenSSL) accepts.
func pemKey(key any) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pemBlock("PRIVATE KEY", der), nil
}

// write stores the PKI under dir (see README.md for the file names).
func (p *pki) write(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	files := []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{"ca.crt", p.caCert, 0o644},
		{"ca.key", p.caKey, 0o600},
		{"apiserver.crt", p.servingCert, 0o644},
		{"apiserver.key", p.servingKey, 0o600},
		{"admin.crt", p.adminCert, 0o644},
		{"admin.key", p.adminKey, 0o600},
		{"sa.key", p.saKey, 0o600},
		{"sa.pub", p.saPub, 0o644},
	}
	for _, f := range files {
		if err := writeFile(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			return err
		}
	}
	return nil
}

// readPKI reads back what a client of the apiserver needs (the CA and the
// admin's certificate) from a directory write filled.
func readPKI(dir string) (*pki, error) {
	p := &pki{}
	for _, f := range []struct {
		name string
		dst  *[]byte
	}{{"ca.crt", &p.caCert}, {"admin.crt", &p.adminCert}, {"admin.key", &p.adminKey}} {
		data, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			return nil, err
		}
		*f.dst = data
	}
	return p, nil
}

// writeFile writes data atomically (temp file + rename), so a reader never
// sees a half-written file.
func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
