package policy

import (
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/meridian-mesh/meridian/policy/compute"
)

// FuzzInbound translates arbitrary manifests as the policy controller does: decoded
// (DecodeManifests), grouped by namespace, and computed (compute.Inbound) for every port of
// every pod they hold. Nothing panics; errors are bounded; every port gets a Server that
// marshals, the same one each time it is computed, and the winning Server is not among its
// conflicts.
func FuzzInbound(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "mesh", "*.yaml"))
	var all []byte
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		all = append(append(all, b...), "\n---\n"...)
	}
	f.Add(all)
	f.Add([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: n, labels: {app: web}}\nspec:\n  containers:\n  - ports: [{name: http, containerPort: 8080}]\n---\n" +
		"apiVersion: policy.linkerd.io/v1beta3\nkind: Server\nmetadata: {name: s, namespace: n}\nspec: {podSelector: {matchLabels: {app: web}}, port: http, proxyProtocol: HTTP/2}\n---\n" +
		"apiVersion: policy.linkerd.io/v1alpha1\nkind: AuthorizationPolicy\nmetadata: {name: a, namespace: n}\nspec:\n  targetRef: {group: policy.linkerd.io, kind: Server, name: s}\n" +
		"  requiredAuthenticationRefs: [{group: policy.linkerd.io, kind: NetworkAuthentication, name: net}]\n---\n" +
		"apiVersion: policy.linkerd.io/v1alpha1\nkind: NetworkAuthentication\nmetadata: {name: net, namespace: n}\nspec: {networks: [{cidr: 10.0.0.0/8, except: [10.1.0.0/16]}]}\n"))
	cfg := compute.DefaultConfig()
	f.Fuzz(func(t *testing.T, data []byte) {
		rs, errs := DecodeManifests("f.yaml", data)
		for _, err := range errs {
			if len(err.Error()) > 4096 {
				t.Fatalf("a %d-byte error", len(err.Error()))
			}
		}
		byNS := map[string]*compute.Resources{}
		ns := func(n string) *compute.Resources {
			if byNS[n] == nil {
				byNS[n] = &compute.Resources{MeshTLS: map[compute.Key]*compute.MeshTLSAuthentication{}, Networks: map[compute.Key]*compute.NetworkAuthentication{}}
			}
			return byNS[n]
		}
		meshTLS := map[compute.Key]*compute.MeshTLSAuthentication{}
		networks := map[compute.Key]*compute.NetworkAuthentication{}
		var pods []*compute.Pod
		for _, r := range rs {
			switch v := r.Value.(type) {
			case *compute.Pod:
				pods = append(pods, v)
			case *compute.Server:
				ns(v.Namespace).Servers = append(ns(v.Namespace).Servers, v)
			case *compute.AuthorizationPolicy:
				ns(v.Namespace).AuthorizationPolicies = append(ns(v.Namespace).AuthorizationPolicies, v)
			case *compute.ServerAuthorization:
				ns(v.Namespace).ServerAuthorizations = append(ns(v.Namespace).ServerAuthorizations, v)
			case *compute.MeshTLSAuthentication:
				meshTLS[r.Key] = v
			case *compute.NetworkAuthentication:
				networks[r.Key] = v
			}
		}
		for _, pod := range pods {
			res := ns(pod.Namespace)
			res.MeshTLS, res.Networks = meshTLS, networks
			ports := map[uint32]bool{80: true, 8080: true}
			for _, ps := range pod.PortNames {
				for _, p := range ps {
					ports[p] = true
				}
			}
			for p := range pod.Probes {
				ports[p] = true
			}
			for port := range ports {
				r := compute.Inbound(&cfg, res, pod, port)
				if r.Server == nil {
					t.Fatalf("%s/%s:%d: no server", pod.Namespace, pod.Name, port)
				}
				if _, err := proto.Marshal(r.Server); err != nil {
					t.Fatalf("%s/%s:%d: %v", pod.Namespace, pod.Name, port, err)
				}
				if again := compute.Inbound(&cfg, res, pod, port); !proto.Equal(r.Server, again.Server) {
					t.Fatalf("%s/%s:%d: two computations differ:\n%v\n%v", pod.Namespace, pod.Name, port, r.Server, again.Server)
				}
				for _, c := range r.Conflicts {
					if c == r.ServerName {
						t.Fatalf("%s/%s:%d: server %s conflicts with itself", pod.Namespace, pod.Name, port, c)
					}
				}
			}
		}
	})
}
