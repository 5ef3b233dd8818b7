package kubetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Binaries are the programs a Server runs.
type Binaries struct {
	Etcd, APIServer string
}

// The environment variables build.sh's output sets, and the one that turns
// their absence into a failure.
const (
	EnvEtcd      = "PREFIXGATE_ETCD"
	EnvAPIServer = "PREFIXGATE_KUBE_APISERVER"
	EnvRequire   = "PREFIXGATE_REQUIRE_KUBE"
)

// BinariesFromEnv reads the binaries' paths from the environment; ok is
// false when either is unset.
func BinariesFromEnv() (b Binaries, ok bool) {
	b = Binaries{Etcd: os.Getenv(EnvEtcd), APIServer: os.Getenv(EnvAPIServer)}
	return b, b.Etcd != "" && b.APIServer != ""
}

// AdminUser is the user the admin token authenticates as, in the
// system:masters group.
const AdminUser = "kubetest-admin"

// Server is a running etcd and kube-apiserver.
type Server struct {
	bins Binaries
	dir  string
	pki  *pki

	etcdURL    string
	apiPort    int
	adminToken string

	mu   sync.Mutex
	etcd *proc
	api  *proc
}

// startGrace is how long SIGTERM is given before SIGKILL.
const startGrace = 2 * time.Second

// Start runs etcd and kube-apiserver with their state in dir, waits until
// the API server is ready and applies the InferencePool CRD.
func Start(bins Binaries, dir string) (*Server, error) {
	p, err := writePKI(dir)
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	s := &Server{bins: bins, dir: dir, pki: p, etcdURL: "http://" + hostPort(ports[0]), apiPort: ports[2], adminToken: randomToken()}
	tokens := fmt.Sprintf("%s,%s,%s,system:masters\n", s.adminToken, AdminUser, AdminUser)
	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(tokens), 0o600); err != nil {
		return nil, err
	}
	peer := "http://" + hostPort(ports[1])
	s.etcd, err = startProc("etcd", filepath.Join(dir, "etcd.log"), bins.Etcd,
		"--name=kubetest", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+s.etcdURL, "--advertise-client-urls="+s.etcdURL,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
		"--initial-cluster=kubetest="+peer, "--unsafe-no-fsync", "--log-level=warn")
	if err != nil {
		return nil, err
	}
	client := &http.Client{Timeout: time.Second}
	err = waitFor(s.etcd, time.Minute, func() error { return httpOK(client, s.etcdURL+"/health") })
	if err == nil {
		err = s.StartAPIServer()
	}
	if err == nil {
		err = s.applyCRDs(context.Background())
	}
	if err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// StartAPIServer starts kube-apiserver on the server's port and waits until
// it is ready; after StopAPIServer it comes back on the same etcd.
func (s *Server) StartAPIServer() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.api != nil && !s.api.exited() {
		return errors.New("kubetest: kube-apiserver is already running")
	}
	api, err := startProc("kube-apiserver", filepath.Join(s.dir, "kube-apiserver.log"), s.bins.APIServer,
		"--etcd-servers="+s.etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+strconv.Itoa(s.apiPort),
		"--tls-cert-file="+s.pki.certFile, "--tls-private-key-file="+s.pki.keyFile,
		"--token-auth-file="+filepath.Join(s.dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+s.pki.saPubFile, "--service-account-signing-key-file="+s.pki.saKeyFile,
		"--service-cluster-ip-range=10.96.0.0/16",
		// No controller manager runs, so nothing creates the default
		// service accounts that admission would require of pods.
		"--disable-admission-plugins=ServiceAccount",
		// The default reconciler refuses a loopback advertise address.
		"--endpoint-reconciler-type=none",
		"--cert-dir="+filepath.Join(s.dir, "certs"))
	if err != nil {
		return err
	}
	s.api = api
	cfg := s.Config()
	tr, err := rest.TransportFor(cfg)
	if err != nil {
		return err
	}
	client := &http.Client{Transport: tr, Timeout: 2 * time.Second}
	return waitFor(api, 2*time.Minute, func() error { return httpOK(client, cfg.Host+"/readyz") })
}

// StopAPIServer kills kube-apiserver at once (SIGKILL), leaving etcd up.
func (s *Server) StopAPIServer() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.api != nil {
		s.api.stop(0)
	}
}

// Stop ends kube-apiserver and etcd (SIGTERM, SIGKILL after a short
// grace). The state directory is the caller's.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.api != nil {
		s.api.stop(startGrace)
	}
	if s.etcd != nil {
		s.etcd.stop(startGrace)
	}
}

// Host is the API server's URL.
func (s *Server) Host() string { return "https://" + hostPort(s.apiPort) }

// Config is a client configuration for the admin user (system:masters).
func (s *Server) Config() *rest.Config { return s.ConfigFor(s.adminToken) }

// ConfigFor is a client configuration that authenticates with a bearer
// token (a service account's, say).
func (s *Server) ConfigFor(token string) *rest.Config {
	return &rest.Config{
		Host: s.Host(), BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{CAData: s.pki.caPEM},
		QPS:             100, Burst: 200,
	}
}

// WriteKubeconfig writes a kubeconfig file that reaches the server with
// token, for a program run as a separate process.
func (s *Server) WriteKubeconfig(path, token string) error {
	c := clientcmdapi.NewConfig()
	c.Clusters["kubetest"] = &clientcmdapi.Cluster{Server: s.Host(), CertificateAuthorityData: s.pki.caPEM}
	c.AuthInfos["kubetest"] = &clientcmdapi.AuthInfo{Token: token}
	c.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: "kubetest"}
	c.CurrentContext = "kubetest"
	return clientcmd.WriteToFile(*c, path)
}

func httpOK(c *http.Client, url string) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
