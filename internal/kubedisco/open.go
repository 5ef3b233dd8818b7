package kubedisco

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/prefixgate/prefixgate/backends"
)

// Config says how to reach the API server.
type Config struct {
	// Kubeconfig is a kubeconfig file (its current context); empty means
	// the in-cluster configuration of the pod's service account.
	Kubeconfig string
	// REST, when set, is used as it is (tests); Kubeconfig is then unused.
	REST *rest.Config
	// Namespace is the namespace of specs that name none; empty means the
	// kubeconfig context's, or in a pod its own (POD_NAMESPACE, else its
	// service account's).
	Namespace string
}

// MaxBackends bounds the backends one source yields; a Service or pool
// with more is an error and the pool keeps its last good list.
const MaxBackends = 4096

// Opener returns the backends.Options.Open of cfg: it opens k8s:// and
// inferencepool:// specs. The API client is made on the first spec and
// shared by every source it opens.
func Opener(cfg Config) func(spec string, changed func()) (backends.Discovery, error) {
	var (
		once sync.Once
		c    *clients
		err  error
	)
	return func(spec string, changed func()) (backends.Discovery, error) {
		scheme, rest, _ := strings.Cut(spec, "://")
		switch strings.ToLower(scheme) {
		case "k8s", "inferencepool":
		default:
			return nil, fmt.Errorf("backend %q: scheme %q is not http, https, dns, srv, file, k8s or inferencepool", spec, scheme)
		}
		ns, name, port, perr := parseRef(spec, scheme, rest)
		if perr != nil {
			return nil, perr
		}
		once.Do(func() { c, err = newClients(cfg) })
		if err != nil {
			return nil, fmt.Errorf("backend %q: %w", spec, err)
		}
		if ns == "" {
			ns = c.namespace
		}
		if strings.EqualFold(scheme, "k8s") {
			return openSlices(c, spec, ns, name, port, changed), nil
		}
		return openPool(c, spec, ns, name, changed), nil
	}
}

type clients struct {
	dynamic   dynamic.Interface
	namespace string // of specs that name none
}

func newClients(cfg Config) (*clients, error) {
	rc, ns := cfg.REST, cfg.Namespace
	if rc == nil {
		// Only the file given, or else the pod's own configuration.
		cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: cfg.Kubeconfig}, &clientcmd.ConfigOverrides{})
		var err error
		rc, err = cc.ClientConfig()
		if clientcmd.IsEmptyConfig(err) || errors.Is(err, rest.ErrNotInCluster) {
			err = errors.New("not running in a Kubernetes pod and no kubeconfig is set (--kubeconfig)")
		}
		if err != nil {
			return nil, err
		}
		if ns == "" {
			if ns, _, err = cc.Namespace(); err != nil {
				return nil, err
			}
		}
	}
	if ns == "" {
		ns = "default"
	}
	rc = rest.CopyConfig(rc)
	rc.UserAgent = "prefixgate"
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return &clients{dynamic: dyn, namespace: ns}, nil
}

// parseRef reads [NAMESPACE/]NAME[:PORT] (k8s:// needs PORT,
// inferencepool:// has none); ns is "" when the spec names none.
func parseRef(spec, scheme, rest string) (ns, name, port string, err error) {
	k8s := strings.EqualFold(scheme, "k8s")
	bad := func(why string) error {
		if k8s {
			return fmt.Errorf("backend %q: %s; want k8s://[NAMESPACE/]SERVICE:PORT (PORT a name or number)", spec, why)
		}
		return fmt.Errorf("backend %q: %s; want inferencepool://[NAMESPACE/]NAME", spec, why)
	}
	if u, uerr := url.PathUnescape(rest); uerr != nil || u != rest || strings.ContainsAny(rest, "?#@") {
		return "", "", "", bad("unexpected characters")
	}
	ref := strings.TrimSuffix(rest, "/")
	if i := strings.IndexByte(ref, '/'); i >= 0 {
		ns, ref = ref[:i], ref[i+1:]
		if strings.Contains(ref, "/") {
			return "", "", "", bad("too many path segments")
		}
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return "", "", "", bad(fmt.Sprintf("namespace %q: %s", ns, errs[0]))
		}
	}
	if !k8s {
		if errs := validation.IsDNS1123Subdomain(ref); len(errs) > 0 {
			return "", "", "", bad(fmt.Sprintf("name %q: %s", ref, errs[0]))
		}
		return ns, ref, "", nil
	}
	name, port, ok := strings.Cut(ref, ":")
	if !ok || port == "" {
		return "", "", "", bad("no port")
	}
	if n, perr := strconv.Atoi(port); perr == nil {
		if n < 1 || n > 65535 {
			return "", "", "", bad(fmt.Sprintf("port %d is not 1..65535", n))
		}
	} else if errs := validation.IsValidPortName(port); len(errs) > 0 {
		return "", "", "", bad(fmt.Sprintf("port name %q: %s", port, errs[0]))
	}
	if errs := validation.IsDNS1035Label(name); len(errs) > 0 {
		return "", "", "", bad(fmt.Sprintf("service %q: %s", name, errs[0]))
	}
	return ns, name, port, nil
}
