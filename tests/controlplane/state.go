package main

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// writeState writes the files other tests use (the contract is in
// README.md). env is written last: once it exists, everything else does.
func (c *cluster) writeState(tokens testTokens, controlURL, binDir string) error {
	token := tokens.sa
	ca := base64.StdEncoding.EncodeToString(c.pki.caCert)
	cluster := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kubelease-test
  cluster:
    server: %s
    certificate-authority-data: %s
`, c.apiURL(), ca)

	admin := cluster + fmt.Sprintf(`users:
- name: admin
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: admin
  context:
    cluster: kubelease-test
    user: admin
current-context: admin
`, base64.StdEncoding.EncodeToString(c.pki.adminCert), base64.StdEncoding.EncodeToString(c.pki.adminKey))

	sa := cluster + fmt.Sprintf(`users:
- name: %[1]s
  user:
    token: %[2]s
contexts:
- name: %[1]s
  context:
    cluster: kubelease-test
    user: %[1]s
    namespace: %[3]s
current-context: %[1]s
`, saName, token, testNamespace)

	saDir := filepath.Join(c.stateDir, "serviceaccount")
	replicaDir := filepath.Join(c.stateDir, "replica")
	for _, d := range []string{saDir, replicaDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	files := []struct {
		path string
		data string
		mode os.FileMode
	}{
		{filepath.Join(c.stateDir, "admin.kubeconfig"), admin, 0o600},
		{filepath.Join(c.stateDir, "sa.kubeconfig"), sa, 0o600},
		{filepath.Join(saDir, "token"), token, 0o644},
		{filepath.Join(saDir, "ca.crt"), string(c.pki.caCert), 0o644},
		{filepath.Join(saDir, "namespace"), testNamespace, 0o644},
		{filepath.Join(replicaDir, "token"), tokens.replica, 0o644},
		{filepath.Join(replicaDir, "operator-token"), tokens.operator, 0o644},
	}
	for _, f := range files {
		if err := writeFile(f.path, []byte(f.data), f.mode); err != nil {
			return err
		}
	}

	vars := [][2]string{
		{"KUBERNETES_SERVICE_HOST", "127.0.0.1"},
		{"KUBERNETES_SERVICE_PORT", fmt.Sprint(c.apiPort)},
		{"KL_APISERVER_URL", c.apiURL()},
		{"KL_TEST_NAMESPACE", testNamespace},
		{"KL_SA_DIR", saDir},
		{"KL_SA_KUBECONFIG", filepath.Join(c.stateDir, "sa.kubeconfig")},
		{"KL_ADMIN_KUBECONFIG", filepath.Join(c.stateDir, "admin.kubeconfig")},
		{"KL_REPLICA_TOKEN_FILE", filepath.Join(replicaDir, "token")},
		{"KL_OPERATOR_TOKEN_FILE", filepath.Join(replicaDir, "operator-token")},
		{"KL_CONTROL_URL", controlURL},
		{"KL_ETCD_URL", c.etcdURL()},
		{"KL_BIN_DIR", binDir},
		{"KL_STATE_DIR", c.stateDir},
	}
	var b strings.Builder
	b.WriteString("# Written by tests/controlplane; see its README.md. Shell-sourceable.\n")
	for _, v := range vars {
		fmt.Fprintf(&b, "%s=%s\n", v[0], shellQuote(v[1]))
	}
	return writeFile(filepath.Join(c.stateDir, "env"), []byte(b.String()), 0o644)
}

// shellQuote leaves plain words alone (so simple parsers can read the file
// as KEY=VALUE) and single-quotes anything else.
func shellQuote(s string) string {
	plain := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_./:@%+,=-", r)) {
			plain = false
			break
		}
	}
	if plain {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
