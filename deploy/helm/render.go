// Package helmchart renders prefixgate's Helm chart (deploy/helm/prefixgate)
// with Helm's own library engine, as `helm template` does, and splits the
// result into its Kubernetes objects. Its tests render every documented
// values profile (prefixgate/profiles), decode each object strictly into
// its Kubernetes type, check the configuration file with prefixgate's own
// loader, and create every object on a real API server.
package helmchart

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"sigs.k8s.io/yaml"
)

// KubeVersion is the Kubernetes version the chart is rendered for (the
// API server the tests run).
const KubeVersion = "v1.37.2"

// Manifest is one rendered object.
type Manifest struct {
	Template   string // the template it came from
	APIVersion string
	Kind       string
	Name       string
	YAML       string
}

// Render renders the chart at chartDir for a release name in namespace
// with the values files given (later ones win), in Helm's strict mode (a
// template that reads a value no file sets fails), after checking the
// values against the chart's schema and the chart's kubeVersion range.
// Manifests come in a fixed order: by template, then as rendered.
func Render(chartDir, release, namespace string, valuesFiles ...string) ([]Manifest, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, fmt.Errorf("helmchart: %w", err)
	}
	vals := chartutil.Values{}
	for _, f := range valuesFiles {
		v, err := chartutil.ReadValuesFile(f)
		if err != nil {
			return nil, fmt.Errorf("helmchart: %s: %w", f, err)
		}
		vals = chartutil.CoalesceTables(v, vals)
	}
	kv, err := chartutil.ParseKubeVersion(KubeVersion)
	if err != nil {
		return nil, fmt.Errorf("helmchart: %w", err)
	}
	if c := ch.Metadata.KubeVersion; c != "" && !chartutil.IsCompatibleRange(c, kv.String()) {
		return nil, fmt.Errorf("helmchart: chart needs Kubernetes %s, not %s", c, kv)
	}
	caps := *chartutil.DefaultCapabilities
	caps.KubeVersion = *kv
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: release, Namespace: namespace, IsInstall: true, Revision: 1}, &caps)
	if err != nil {
		return nil, fmt.Errorf("helmchart: %w", err)
	}
	files, err := engine.Engine{Strict: true}.Render(ch, rv)
	if err != nil {
		return nil, fmt.Errorf("helmchart: %w", err)
	}
	return split(ch, files)
}

// split cuts each rendered template into its objects, leaving out
// NOTES.txt, helpers and templates that rendered nothing.
func split(ch *chart.Chart, files map[string]string) ([]Manifest, error) {
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	var out []Manifest
	for _, name := range names {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		docs := releaseutil.SplitManifests(files[name])
		keys := make([]string, 0, len(docs))
		for k := range docs {
			keys = append(keys, k)
		}
		sort.Sort(releaseutil.BySplitManifestsOrder(keys))
		for _, k := range keys {
			doc := strings.TrimSpace(docs[k])
			if doc == "" {
				continue
			}
			var head struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Metadata   struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				return nil, fmt.Errorf("helmchart: %s: %w", strings.TrimPrefix(name, ch.Name()+"/"), err)
			}
			if head.APIVersion == "" || head.Kind == "" || head.Metadata.Name == "" {
				return nil, fmt.Errorf("helmchart: %s: an object without apiVersion, kind or metadata.name:\n%s", name, doc)
			}
			out = append(out, Manifest{Template: filepath.Base(name), APIVersion: head.APIVersion, Kind: head.Kind, Name: head.Metadata.Name, YAML: doc})
		}
	}
	return out, nil
}
