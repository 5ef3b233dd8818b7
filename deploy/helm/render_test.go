package helmchart_test

import (
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	helmchart "github.com/prefixgate/prefixgate/deploy/helm"
	"github.com/prefixgate/prefixgate/internal/config"
	"github.com/prefixgate/prefixgate/internal/image"
	"github.com/prefixgate/prefixgate/internal/kubedisco"
)

const (
	chartDir  = "prefixgate"
	release   = "pg"
	namespace = "inference"
)

// profiles are the documented values profiles (docs/kubernetes.md) and
// the kinds each renders; a file in profiles/ not listed here fails.
var profiles = map[string][]string{
	"serve-default":         {"ConfigMap", "Deployment", "PodDisruptionBudget", "Role", "RoleBinding", "Service", "ServiceAccount"},
	"serve-static-backends": {"ConfigMap", "Deployment", "PodDisruptionBudget", "Service", "ServiceAccount"},
	"serve-servicemonitor":  {"ConfigMap", "Deployment", "PodDisruptionBudget", "Role", "RoleBinding", "Service", "ServiceAccount", "ServiceMonitor"},
	"epp":                   {"ConfigMap", "Deployment", "InferencePool", "PodDisruptionBudget", "Role", "RoleBinding", "Service", "ServiceAccount"},
}

// rendered is one profile's objects, decoded.
type rendered struct {
	mode      string
	manifests []helmchart.Manifest
	objects   []any
	settings  config.Settings
	dep       *appsv1.Deployment
	svc       *corev1.Service
	cm        *corev1.ConfigMap
}

func renderProfile(t *testing.T, profile string) rendered {
	t.Helper()
	file := filepath.Join(chartDir, "profiles", profile+".yaml")
	ms, err := helmchart.Render(chartDir, release, namespace, file)
	if err != nil {
		t.Fatal(err)
	}
	r := rendered{manifests: ms}
	var kinds []string
	for _, m := range ms {
		obj, err := decode(m)
		if err != nil {
			t.Fatal(err)
		}
		r.objects = append(r.objects, obj)
		kinds = append(kinds, m.Kind)
		switch o := obj.(type) {
		case *appsv1.Deployment:
			r.dep = o
		case *corev1.Service:
			r.svc = o
		case *corev1.ConfigMap:
			r.cm = o
		}
	}
	slices.Sort(kinds)
	if want := profiles[profile]; !slices.Equal(kinds, want) {
		t.Fatalf("profile %s renders %v, want %v", profile, kinds, want)
	}
	r.mode = r.dep.Spec.Template.Spec.Containers[0].Args[0]
	r.settings = checkConfigFile(t, r.mode, r.cm.Data["prefixgate.yaml"])
	return r
}

// TestProfilesRenderAndDecodeStrictly renders every profile with Helm's
// engine, decodes every object strictly into its Kubernetes type, loads
// the configuration file with prefixgate's loader, and checks that the
// objects fit together: ports, probes, selectors, names and the drain.
func TestProfilesRenderAndDecodeStrictly(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(chartDir, "profiles", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".yaml"))
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "kubernetes.md"))
	if err != nil {
		t.Fatal(err)
	}
	for name := range profiles {
		if !slices.Contains(names, name) {
			t.Errorf("profile %s is listed but profiles/%s.yaml is missing", name, name)
		}
		if !strings.Contains(string(doc), "`"+name+".yaml`") {
			t.Errorf("docs/kubernetes.md does not describe the profile %s.yaml", name)
		}
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			if _, ok := profiles[name]; !ok {
				t.Fatalf("profiles/%s.yaml is not in the test's list of profiles", name)
			}
			r := renderProfile(t, name)
			checkPod(t, r)
			checkProbes(t, r)
			for _, obj := range r.objects {
				checkObject(t, r, obj)
			}
		})
	}
}

// checkPod checks the pod's security, its configuration mount and its
// shutdown budget.
func checkPod(t *testing.T, r rendered) {
	t.Helper()
	pod := r.dep.Spec.Template.Spec
	sel, err := metaSelector(r.dep.Spec.Selector.MatchLabels)
	if err != nil || !sel.Matches(labels.Set(r.dep.Spec.Template.Labels)) {
		t.Errorf("the Deployment's selector %v does not select its pods %v", r.dep.Spec.Selector.MatchLabels, r.dep.Spec.Template.Labels)
	}
	psc, c := pod.SecurityContext, pod.Containers[0]
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != image.UID {
		t.Errorf("pod securityContext %+v: want runAsNonRoot and the image's user %d", psc, image.UID)
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("container securityContext %+v: want a read-only root and no privilege escalation", sc)
	}
	if want := []string{r.mode, "--config", "/etc/prefixgate/prefixgate.yaml"}; !slices.Equal(c.Args[:3], want) {
		t.Errorf("args %q, want %q first", c.Args, want)
	}
	mounted := false
	for _, vm := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name == vm.Name && v.ConfigMap != nil && v.ConfigMap.Name == r.cm.Name && vm.MountPath == "/etc/prefixgate" {
				mounted = true
			}
		}
	}
	if !mounted {
		t.Errorf("the ConfigMap %s is not mounted at /etc/prefixgate", r.cm.Name)
	}
	pre := c.Lifecycle.PreStop
	if pre == nil || pre.Sleep == nil || pod.TerminationGracePeriodSeconds == nil {
		t.Fatalf("no preStop sleep or terminationGracePeriodSeconds")
	}
	if budget := pre.Sleep.Seconds + int64(r.settings.DrainTimeout.Seconds()); *pod.TerminationGracePeriodSeconds <= budget {
		t.Errorf("terminationGracePeriodSeconds %d leaves no time after the preStop sleep (%ds) and drain_timeout (%s)",
			*pod.TerminationGracePeriodSeconds, pre.Sleep.Seconds, r.settings.DrainTimeout)
	}
}

func metaSelector(m map[string]string) (labels.Selector, error) {
	return labels.ValidatedSelectorFromSet(m)
}

// containerPort is the number of the container port named name, or 0.
func containerPort(r rendered, name string) int32 {
	for _, p := range r.dep.Spec.Template.Spec.Containers[0].Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

// listenPort is the port of a listen address.
func listenPort(t *testing.T, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	n, err2 := strconv.Atoi(p)
	if err != nil || err2 != nil {
		t.Fatalf("listen address %q has no port", addr)
	}
	return int32(n)
}

// checkProbes checks that the probes ask what prefixgate serves, on the
// ports it listens on.
func checkProbes(t *testing.T, r rendered) {
	t.Helper()
	c := r.dep.Spec.Template.Spec.Containers[0]
	live, ready := c.LivenessProbe, c.ReadinessProbe
	if r.mode == "serve" {
		if got, want := containerPort(r, "http"), listenPort(t, r.settings.Listen); got != want {
			t.Errorf("container port http is %d, prefixgate listens on %d", got, want)
		}
		if live.HTTPGet == nil || live.HTTPGet.Path != "/healthz" || live.HTTPGet.Port.String() != "http" ||
			ready.HTTPGet == nil || ready.HTTPGet.Path != "/readyz" || ready.HTTPGet.Port.String() != "http" {
			t.Errorf("probes %+v / %+v: want GET /healthz and /readyz on port http", live, ready)
		}
		return
	}
	health := listenPort(t, r.settings.EPPHealthListen)
	if containerPort(r, "grpc") != listenPort(t, r.settings.EPPListen) || containerPort(r, "grpc-health") != health ||
		containerPort(r, "metrics") != listenPort(t, r.settings.EPPMetricsListen) {
		t.Errorf("container ports %+v differ from epp's listeners %s %s %s", c.Ports, r.settings.EPPListen, r.settings.EPPHealthListen, r.settings.EPPMetricsListen)
	}
	if live.GRPC == nil || live.GRPC.Port != health || live.GRPC.Service == nil || *live.GRPC.Service != "liveness" ||
		ready.GRPC == nil || ready.GRPC.Port != health || ready.GRPC.Service == nil || *ready.GRPC.Service != "readiness" {
		t.Errorf("probes %+v / %+v: want gRPC health liveness and readiness on %d", live, ready, health)
	}
}

// checkObject checks how obj refers to the others.
func checkObject(t *testing.T, r rendered, obj any) {
	t.Helper()
	podLabels := labels.Set(r.dep.Spec.Template.Labels)
	switch o := obj.(type) {
	case *corev1.Service:
		if !labels.SelectorFromSet(o.Spec.Selector).Matches(podLabels) {
			t.Errorf("Service selector %v does not select the pods", o.Spec.Selector)
		}
		for _, p := range o.Spec.Ports {
			if containerPort(r, p.TargetPort.String()) == 0 {
				t.Errorf("Service port %s targets %s, which the container does not have", p.Name, p.TargetPort.String())
			}
		}
	case *policyv1.PodDisruptionBudget:
		if !labels.SelectorFromSet(o.Spec.Selector.MatchLabels).Matches(podLabels) {
			t.Errorf("PodDisruptionBudget selector %v does not select the pods", o.Spec.Selector)
		}
	case *rbacv1.RoleBinding:
		if o.RoleRef.Kind != "Role" || len(o.Subjects) != 1 || o.Subjects[0].Name != r.dep.Spec.Template.Spec.ServiceAccountName {
			t.Errorf("RoleBinding %+v does not bind the Role to the pods' ServiceAccount", o)
		}
	case *rbacv1.Role:
		checkRole(t, o)
	case *monitoringv1.ServiceMonitor:
		if len(o.Spec.Endpoints) != 1 || servicePort(r.svc, o.Spec.Endpoints[0].Port) == 0 || o.Spec.Endpoints[0].Path != "/metrics" {
			t.Errorf("ServiceMonitor endpoints %+v: want /metrics on a port of Service %s", o.Spec.Endpoints, r.svc.Name)
		}
	case *inferencePool:
		ref := o.Spec.EndpointPickerRef
		if ref.Kind != "Service" || ref.Name != r.svc.Name || ref.Port.Number != servicePort(r.svc, "grpc") || ref.Port.Number == 0 {
			t.Errorf("endpointPickerRef %+v does not name the picker's Service %s and its grpc port", ref, r.svc.Name)
		}
		if len(o.Spec.TargetPorts) != 1 || len(o.Spec.Selector.MatchLabels) == 0 {
			t.Errorf("InferencePool spec %+v: want one target port and a selector", o.Spec)
		}
	}
}

func servicePort(svc *corev1.Service, name string) int32 {
	for _, p := range svc.Spec.Ports {
		if p.Name == name {
			return p.Port
		}
	}
	return 0
}

// checkRole checks that the Role grants exactly what discovery reads.
func checkRole(t *testing.T, role *rbacv1.Role) {
	t.Helper()
	if want := kubedisco.Rules(); !reflect.DeepEqual(role.Rules, want) {
		got, _ := yaml.Marshal(role.Rules)
		w, _ := yaml.Marshal(want)
		t.Errorf("the Role's rules are\n%s\nwant discovery's (kubedisco.Rules)\n%s", got, w)
	}
}
