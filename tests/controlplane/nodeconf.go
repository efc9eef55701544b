package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// The node's network, inside its own network namespace: nothing here is
// routed to or from the machine's interfaces. The node's address sits on the
// namespace's loopback device; the Pods hang off the bridge kl0; Services
// take addresses from serviceCIDR (the apiserver's default Service
// "kubernetes" is serviceIP, as in the loopback control plane).
const (
	nodeName    = "kubelease-node"
	nodeIP      = "10.2.0.1"
	podCIDR     = "10.1.0.0/24"
	podGateway  = "10.1.0.1"
	podBridge   = "kl0"
	apiPortNode = 6443 // the apiserver's port inside the node
	// The sandbox image containerd runs every Pod's namespaces in
	// (scripts/build-images.sh builds it).
	pauseImage = "localhost/kubelease/pause:3.10"
)

// nodeSpec is what node-init needs to bring the node up; the outer harness
// writes it (node/spec.json) with every configuration file before starting
// node-init.
type nodeSpec struct {
	StateDir   string   `json:"stateDir"`
	BinDir     string   `json:"binDir"`
	Images     []string `json:"images"`     // image archives for containerd's k8s.io namespace
	CgroupRoot string   `json:"cgroupRoot"` // the kubelet's --cgroup-root, made in every hierarchy
	TimeoutSec int      `json:"timeoutSec"` // for each component to become ready
}

// nodePaths names the files of a node's state directory.
type nodePaths string

func (d nodePaths) dir(parts ...string) string {
	return filepath.Join(append([]string{string(d)}, parts...)...)
}
func (d nodePaths) pki(name string) string  { return d.dir("pki", name) }
func (d nodePaths) conf(name string) string { return d.dir("node", name) }
func (d nodePaths) log(name string) string  { return d.dir(name + ".log") }
func (d nodePaths) kubeconfig(user string) string {
	return d.dir("node", user+".kubeconfig")
}
func (d nodePaths) containerdSock() string { return d.dir("node", "containerd", "containerd.sock") }

// apiSock: node-supervise forwards it to the apiserver inside the node.
func (d nodePaths) apiSock() string { return d.dir("node", "api.sock") }

// kubeconfigText is a kubeconfig for server with a client certificate.
func kubeconfigText(server string, caPEM, certPEM, keyPEM []byte, user string) string {
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kubelease-node
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: %s
  context:
    cluster: kubelease-node
    user: %s
current-context: %s
`, server, b64(caPEM), user, b64(certPEM), b64(keyPEM), user, user, user)
}

// nodeComponentUsers: the users the components authenticate as, with the
// groups that the apiserver's bootstrap RBAC policy (and the Node
// authorizer, for the kubelet) grant what they need.
var nodeComponentUsers = []struct {
	file, cn string
	orgs     []string
}{
	{"kube-controller-manager", "system:kube-controller-manager", nil},
	{"kube-scheduler", "system:kube-scheduler", nil},
	{"kubelet", "system:node:" + nodeName, []string{"system:nodes"}},
	{"kube-proxy", "system:kube-proxy", nil},
	{"admin", "kubelease-admin", []string{"system:masters"}},
}

// writeNodeConfig writes the PKI, the components' kubeconfigs and
// configuration files, and spec.json into the state directory.
func writeNodeConfig(d nodePaths, p *pki, spec nodeSpec) error {
	if err := p.write(d.dir("pki")); err != nil {
		return err
	}
	for _, dir := range []string{d.dir("node"), d.dir("node", "cni", "net.d"), d.dir("node", "containerd")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	files := map[string]string{}
	server := fmt.Sprintf("https://127.0.0.1:%d", apiPortNode)
	for _, u := range nodeComponentUsers {
		cert, key, err := p.issueClient(u.cn, u.orgs...)
		if err != nil {
			return err
		}
		files[d.kubeconfig(u.file)] = kubeconfigText(server, p.caCert, cert, key, u.file)
	}
	// The apiserver's client certificate towards kubelets (logs, exec).
	cert, key, err := p.issueClient("kube-apiserver-kubelet-client", "system:masters")
	if err != nil {
		return err
	}
	files[d.pki("apiserver-kubelet-client.crt")] = string(cert)
	files[d.pki("apiserver-kubelet-client.key")] = string(key)
	// The kubelet's serving certificate.
	if cert, key, err = p.issueServing(nodeName, []net.IP{net.ParseIP(nodeIP), net.ParseIP("127.0.0.1")}, []string{nodeName}); err != nil {
		return err
	}
	files[d.pki("kubelet.crt")] = string(cert)
	files[d.pki("kubelet.key")] = string(key)

	files[d.conf("kubelet.yaml")] = kubeletConfig(d, spec)
	files[d.conf("kube-proxy.yaml")] = kubeProxyConfig(d)
	files[d.conf("containerd.toml")] = containerdConfig(d)
	files[d.dir("node", "cni", "net.d", "10-kubelease.conflist")] = cniConfig(d)
	js, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return err
	}
	files[d.conf("spec.json")] = string(js) + "\n"
	for path, text := range files {
		mode := os.FileMode(0o644)
		if strings.HasSuffix(path, ".key") || strings.HasSuffix(path, ".kubeconfig") {
			mode = 0o600
		}
		if err := writeFile(path, []byte(text), mode); err != nil {
			return err
		}
	}
	return nil
}

// kubeletConfig: the kubelet on cgroup v1 with the cgroupfs driver (set
// explicitly: containerd 1.6 cannot tell it the driver), its cgroups under
// a root of its own, no image garbage collection (the images cannot be
// pulled again) and no eviction for disk the machine's other work fills,
// kernel defaults checked but never written (node-init shows it the values
// it wants), and no DNS: Pods get no nameserver.
func kubeletConfig(d nodePaths, spec nodeSpec) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: %[2]s
tlsPrivateKeyFile: %[3]s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[4]s}
authorization:
  mode: Webhook
containerRuntimeEndpoint: unix://%[5]s
cgroupDriver: cgroupfs
cgroupRoot: %[6]s
cgroupsPerQOS: true
enforceNodeAllocatable: [pods]
failSwapOn: false
failCgroupV1: false
protectKernelDefaults: true
resolvConf: ""
clusterDomain: cluster.local
podLogsDir: %[7]s
volumePluginDir: %[8]s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 1Mi
  nodefs.available: "0%%"
  nodefs.inodesFree: "0%%"
  imagefs.available: "0%%"
maxPods: 60
serializeImagePulls: false
rotateCertificates: false
serverTLSBootstrap: false
`, nodeIP, d.pki("kubelet.crt"), d.pki("kubelet.key"), d.pki("ca.crt"), d.containerdSock(),
		spec.CgroupRoot, d.dir("node", "pod-logs"), d.dir("node", "volume-plugins"))
}

// kubeProxyConfig: iptables mode; conntrack settings left as they are (the
// netfilter conntrack limits are the machine's, not the namespace's).
func kubeProxyConfig(d nodePaths) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
mode: iptables
clusterCIDR: %s
hostnameOverride: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
iptables:
  localhostNodePorts: false
`, d.kubeconfig("kube-proxy"), podCIDR, nodeName)
}

// containerdConfig: containerd's root, state and socket in the state
// directory, the CRI plugin with runc (cgroupfs), the locally built sandbox
// image and the CNI configuration below.
func containerdConfig(d nodePaths) string {
	return fmt.Sprintf(`version = 2
root = %q
state = %q
oom_score = 0

[grpc]
  address = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  enable_selinux = false
  disable_apparmor = true
  # The harness's process may lack CAP_SYS_RESOURCE: Pods' OOM scores are
  # kept no lower than containerd's own.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
    max_conf_num = 1
`, d.dir("node", "containerd", "root"), d.dir("node", "containerd", "state"), d.containerdSock(),
		pauseImage, d.dir("node", "cni", "net.d"))
}

// cniConfig: a bridge with host-local addresses; no IP masquerade (there is
// nowhere to go), hairpin mode so a Pod reaches itself through a Service.
func cniConfig(d nodePaths) string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "kubelease",
  "plugins": [{
    "type": "bridge",
    "bridge": %q,
    "isGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "ranges": [[{"subnet": %q, "gateway": %q}]],
      "routes": [{"dst": "0.0.0.0/0"}],
      "dataDir": %q
    }
  }]
}
`, podBridge, podCIDR, podGateway, d.dir("node", "cni", "networks"))
}
