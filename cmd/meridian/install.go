package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/meridian-mesh/meridian/identity"
	"github.com/meridian-mesh/meridian/internal/chart"
	"github.com/meridian-mesh/meridian/internal/kube"
)

func init() {
	register(&command{
		name:    "install",
		summary: "print the control plane's manifests (the embedded Helm chart, rendered) for kubectl apply -f -",
		run:     runInstall,
	})
}

// installValidity is how long the trust anchor and issuer that install generates are valid.
const installValidity = 365 * 24 * time.Hour

func runInstall(ctx context.Context, args []string) error {
	fs := newFlagSet("install")
	var o chart.Options
	var files, sets stringsFlag
	fs.Var(&files, "values", "a values file for the chart (repeatable; a later file wins), as helm's -f")
	fs.Var(&files, "f", "shorthand for --values")
	fs.Var(&sets, "set", "a chart value, as helm's --set (a.b=c,d=e; repeatable)")
	fs.BoolVar(&o.HA, "ha", false, "start from the chart's values-ha.yaml: 3 destination replicas, 2 of the others, PodDisruptionBudgets, anti-affinity, requests and limits")
	fs.StringVar(&o.Namespace, "namespace", "linkerd", "the control plane's namespace")
	fs.StringVar(&o.ReleaseName, "release-name", "meridian", "the release name in the objects' labels")
	kubeconfig := fs.String("kubeconfig", "", kube.KubeconfigUsage+"; the cluster install reads (as helm install does) to keep what an earlier install generated")
	ignoreCluster := fs.Bool("ignore-cluster", false, "render without reading the cluster: every run then generates a new trust anchor, gossip key and webhook certificate")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if err := dnsName("--namespace", o.Namespace, validation.IsDNS1123Label); err != nil {
		return err
	}
	o.ValueFiles, o.Set = files, sets
	o.Base = map[string]any{"image": map[string]any{"tag": version}}
	eff, err := chart.EffectiveValues(o)
	if err != nil {
		return err
	}
	if !*ignoreCluster {
		if o.Cluster, err = installCluster(ctx, *kubeconfig, o.Namespace, needsIdentity(eff)); err != nil {
			return err
		}
	}
	if needsIdentity(eff) {
		td, _ := eff["identityTrustDomain"].(string)
		if err := dnsName("identityTrustDomain", td, validation.IsDNS1123Subdomain); err != nil {
			return err // before anything is generated (the schema would say it only after)
		}
		g, err := identity.GenerateInstall(td, o.Namespace, installValidity, time.Now(), false)
		if err != nil {
			return fmt.Errorf("generate the trust anchor and issuer: %w", err)
		}
		scheme, _ := lookupString(eff, "identity", "issuer", "scheme")
		o.Base = chartMerge(o.Base, identityValues(g, td, scheme))
		fmt.Fprintf(stderr, "meridian install: no trust anchor or issuer given: generated both for %s, valid until %s.\n"+
			"  The trust anchor's key is not kept; to rotate the issuer later, make your own with\n"+
			"  `meridian identity init --values-out values-identity.yaml` and pass --values values-identity.yaml.\n",
			td, g.IssuerNotAfter.UTC().Format(time.RFC3339))
	}
	r, err := chart.Render(o)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	for _, m := range r.CRDs {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.Source, m.Content)
	}
	fmt.Fprintf(&b, "---\n%s", namespaceManifest(o.Namespace))
	for _, m := range r.Manifests {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.Source, m.Content)
	}
	_, err = stdout.Write(b.Bytes())
	return err
}

// installCluster returns the cluster install renders against (nil: none is configured, and
// it renders offline, saying so). It refuses to generate a trust anchor (generate) where a
// control plane already runs in namespace: every proxy's certificates would stop verifying.
func installCluster(ctx context.Context, kubeconfig, namespace string, generate bool) (*rest.Config, error) {
	rc, err := kube.RESTConfig(kubeconfig)
	if errors.Is(err, kube.ErrNoConfig) {
		fmt.Fprintf(stderr, "meridian install: no cluster configured: rendered offline, so the gossip key and the webhook's\n"+
			"  certificate are new on every run (give --kubeconfig to keep those of an earlier install).\n")
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = client.CoreV1().ConfigMaps(namespace).Get(ctx, trustRootsConfigMap, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return rc, nil
	case err != nil:
		return nil, fmt.Errorf("cannot read namespace %s of the cluster %s to keep what an earlier install made: %w "+
			"(--ignore-cluster renders without it)", namespace, rc.Host, err)
	case generate:
		return nil, fmt.Errorf("namespace %s of the cluster %s already has a control plane (ConfigMap %s): a new trust anchor "+
			"would break the mTLS of every meshed pod. Pass the identity values it was installed with (--values), "+
			"or --ignore-cluster to render anyway", namespace, rc.Host, trustRootsConfigMap)
	}
	return rc, nil
}

// trustRootsConfigMap is the chart's ConfigMap of the trust anchors.
const trustRootsConfigMap = "linkerd-identity-trust-roots"

// needsIdentity reports whether the values leave the trust anchors and issuer to the chart
// and give none.
func needsIdentity(v map[string]any) bool {
	if ext, _ := lookup(v, "identity", "externalCA").(bool); ext {
		return false
	}
	anchors, _ := v["identityTrustAnchorsPEM"].(string)
	crt, _ := lookupString(v, "identity", "issuer", "tls", "crtPEM")
	key, _ := lookupString(v, "identity", "issuer", "tls", "keyPEM")
	return strings.TrimSpace(anchors) == "" && strings.TrimSpace(crt) == "" && strings.TrimSpace(key) == ""
}

// identityValues are the chart values that carry g (see identityValuesYAML for the file).
func identityValues(g *identity.GeneratedInstall, trustDomain, scheme string) map[string]any {
	if scheme == "" {
		scheme = "linkerd.io/tls"
	}
	return map[string]any{
		"identityTrustDomain":     trustDomain,
		"identityTrustAnchorsPEM": string(g.AnchorsPEM),
		"identity": map[string]any{"issuer": map[string]any{
			"scheme": scheme,
			"tls":    map[string]any{"crtPEM": string(g.CertPEM), "keyPEM": string(g.KeyPEM)},
		}},
	}
}

// identityValuesYAML is the values file `meridian identity init` prints, with comments.
func identityValuesYAML(g *identity.GeneratedInstall, trustDomain, scheme string) []byte {
	if scheme == "" {
		scheme = "linkerd.io/tls"
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Identity values for the Meridian chart, from `meridian identity init`: the trust anchor and\n"+
		"# an issuer it signed, both valid until %s.\n"+
		"#   helm install meridian deploy/charts/meridian -n linkerd --create-namespace -f THIS_FILE\n"+
		"# It holds the issuer's private key: keep it as secret as the cluster's Secrets.\n",
		g.IssuerNotAfter.UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "identityTrustDomain: %s\n", trustDomain)
	fmt.Fprintf(&b, "identityTrustAnchorsPEM: |\n%s", indent(string(g.AnchorsPEM), "  "))
	fmt.Fprintf(&b, "identity:\n  issuer:\n    scheme: %s\n    tls:\n", scheme)
	fmt.Fprintf(&b, "      crtPEM: |\n%s", indent(string(g.CertPEM), "        "))
	fmt.Fprintf(&b, "      keyPEM: |\n%s", indent(string(g.KeyPEM), "        "))
	return b.Bytes()
}

// namespaceManifest is the control plane's namespace, which the webhook skips.
func namespaceManifest(ns string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %s
  labels:
    config.linkerd.io/admission-webhooks: disabled
    linkerd.io/is-control-plane: "true"
    linkerd.io/control-plane-ns: %s
`, ns, ns)
}

func indent(s, prefix string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(strings.TrimRight(s, "\n")+"\n", "\n") {
		if line != "" {
			b.WriteString(prefix + line)
		}
	}
	return b.String()
}

func lookup(v map[string]any, path ...string) any {
	var cur any = v
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}

func lookupString(v map[string]any, path ...string) (string, bool) {
	s, ok := lookup(v, path...).(string)
	return s, ok
}

// chartMerge merges b over a (maps key by key).
func chartMerge(a, b map[string]any) map[string]any {
	out := make(map[string]any, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		am, aok := out[k].(map[string]any)
		bm, bok := v.(map[string]any)
		if aok && bok {
			out[k] = chartMerge(am, bm)
			continue
		}
		out[k] = v
	}
	return out
}

// stringsFlag is a repeatable flag keeping each value as given (no comma splitting: --set
// values hold their own commas).
type stringsFlag []string

func (s *stringsFlag) String() string { return strings.Join(*s, " ") }

func (s *stringsFlag) Set(v string) error {
	*s = append(*s, v)
	return nil
}
