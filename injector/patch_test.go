package injector

import (
	"encoding/json"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func controller(kind, name string) []metav1.OwnerReference {
	yes := true
	return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: "u", Controller: &yes}}
}

// applyPatch applies ops to pod's JSON, the way the API server does, and decodes the result.
func applyPatch(t *testing.T, pod *corev1.Pod, ops []PatchOp) *corev1.Pod {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := MarshalPatch(ops)
	if err != nil {
		t.Fatal(err)
	}
	p, err := jsonpatch.DecodePatch(pb)
	if err != nil {
		t.Fatalf("decode patch: %v\n%s", err, pb)
	}
	patched, err := p.Apply(raw)
	if err != nil {
		t.Fatalf("apply patch: %v\n%s", err, pb)
	}
	var out corev1.Pod
	if err := json.Unmarshal(patched, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

func TestPatchPerWorkloadKind(t *testing.T) {
	base := func() corev1.Pod {
		return corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "apps"},
			Spec: corev1.PodSpec{
				ServiceAccountName: "web",
				Containers: []corev1.Container{{Name: "app", Image: "app:1", Ports: []corev1.ContainerPort{
					{ContainerPort: 8080}, {ContainerPort: 9090}, {ContainerPort: 8080, Protocol: corev1.ProtocolUDP},
				}}},
			},
		}
	}
	cases := []struct {
		name      string
		pod       func() corev1.Pod
		nsAnn     map[string]string
		wantOwner string // label linkerd.io/proxy-<kind>=<name>, "" for none expected
		native    bool
	}{
		{name: "deployment", native: true, wantOwner: "linkerd.io/proxy-deployment=web", pod: func() corev1.Pod {
			p := base()
			p.GenerateName = "web-5d9c7b-"
			p.Labels = map[string]string{"app": "web", "pod-template-hash": "5d9c7b"}
			p.OwnerReferences = controller("ReplicaSet", "web-5d9c7b")
			return p
		}},
		{name: "statefulset with existing init containers and volumes", native: true, wantOwner: "linkerd.io/proxy-statefulset=db", pod: func() corev1.Pod {
			p := base()
			p.Name = "db-0"
			p.Labels = map[string]string{"app": "db"}
			p.Annotations = map[string]string{"a/b~c": "x"}
			p.OwnerReferences = controller("StatefulSet", "db")
			p.Spec.InitContainers = []corev1.Container{{Name: "migrate", Image: "m"}}
			p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			return p
		}},
		{name: "daemonset as regular container", native: false, wantOwner: "linkerd.io/proxy-daemonset=agent", nsAnn: map[string]string{AnnotationNativeSidecar: "false"}, pod: func() corev1.Pod {
			p := base()
			p.GenerateName = "agent-"
			p.OwnerReferences = controller("DaemonSet", "agent")
			return p
		}},
		{name: "job", native: true, wantOwner: "linkerd.io/proxy-job=batch-1", pod: func() corev1.Pod {
			p := base()
			p.GenerateName = "batch-1-"
			p.Labels = map[string]string{}
			p.OwnerReferences = controller("Job", "batch-1")
			return p
		}},
		{name: "bare pod regular container via pod annotation", native: false, wantOwner: "linkerd.io/proxy-pod=solo", pod: func() corev1.Pod {
			p := base()
			p.Name = "solo"
			p.Annotations = map[string]string{AnnotationNativeSidecar: "false", AnnotationInject: "enabled"}
			p.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "s"}}
			return p
		}},
	}
	cfg := DefaultConfig()
	cfg.TrustAnchorsPEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := tc.pod()
			orig := pod.DeepCopy()
			ns := Meta{Annotations: map[string]string{AnnotationInject: "enabled"}}
			for k, v := range tc.nsAnn {
				ns.Annotations[k] = v
			}
			out := cfg.Review(ns, "apps", &pod.ObjectMeta, &pod.Spec, false)
			if !out.Decision.Inject {
				t.Fatalf("not injected: %+v %s", out.Decision, out.Detail)
			}
			if !equality.Semantic.DeepEqual(&pod, orig) {
				t.Fatal("Review modified its input")
			}
			ops := out.Mutation.Patch("", &pod.ObjectMeta, &pod.Spec)
			got := applyPatch(t, &pod, ops)

			want := pod.DeepCopy()
			out.Mutation.ApplyTo(&want.ObjectMeta, &want.Spec)
			// Round-trip want through JSON too, so both sides have the same encoding.
			wantRT := applyPatch(t, want, nil)
			if !equality.Semantic.DeepEqual(got, wantRT) {
				a, _ := json.MarshalIndent(got, "", " ")
				b, _ := json.MarshalIndent(wantRT, "", " ")
				t.Fatalf("patched pod differs from ApplyTo:\npatched %s\nwant %s", a, b)
			}
			checkInjected(t, got, orig, tc.native)
			k, v, _ := strings.Cut(tc.wantOwner, "=")
			if got.Labels[k] != v {
				t.Errorf("label %s = %q, want %q (labels %v)", k, got.Labels[k], v, got.Labels)
			}
			for k, v := range orig.Annotations {
				if got.Annotations[k] != v {
					t.Errorf("annotation %s lost", k)
				}
			}
		})
	}
}

// checkInjected verifies the shape of an injected pod against the original.
func checkInjected(t *testing.T, got, orig *corev1.Pod, native bool) {
	t.Helper()
	var proxy *corev1.Container
	if native {
		if len(got.Spec.InitContainers) != len(orig.Spec.InitContainers)+2 {
			t.Fatalf("init containers %d, want %d", len(got.Spec.InitContainers), len(orig.Spec.InitContainers)+2)
		}
		if got.Spec.InitContainers[0].Name != InitContainerName || got.Spec.InitContainers[1].Name != ProxyContainerName {
			t.Fatalf("init containers start %s, %s; want linkerd-init, linkerd-proxy", got.Spec.InitContainers[0].Name, got.Spec.InitContainers[1].Name)
		}
		proxy = &got.Spec.InitContainers[1]
		if proxy.RestartPolicy == nil || *proxy.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			t.Error("native sidecar without restartPolicy Always")
		}
		if !equality.Semantic.DeepEqual(got.Spec.Containers, orig.Spec.Containers) {
			t.Error("containers changed in native mode")
		}
	} else {
		if got.Spec.InitContainers[0].Name != InitContainerName || len(got.Spec.InitContainers) != len(orig.Spec.InitContainers)+1 {
			t.Fatalf("init containers %v", got.Spec.InitContainers)
		}
		if got.Spec.Containers[0].Name != ProxyContainerName || len(got.Spec.Containers) != len(orig.Spec.Containers)+1 {
			t.Fatalf("containers %v", got.Spec.Containers)
		}
		proxy = &got.Spec.Containers[0]
		if proxy.RestartPolicy != nil {
			t.Error("regular proxy container has a restartPolicy")
		}
	}
	for i, c := range orig.Spec.InitContainers {
		if got.Spec.InitContainers[len(got.Spec.InitContainers)-len(orig.Spec.InitContainers)+i].Name != c.Name {
			t.Errorf("user init container %s moved", c.Name)
		}
	}
	ports := map[string]int32{}
	for _, p := range proxy.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["linkerd-proxy"] != 4143 || ports["linkerd-admin"] != 4191 {
		t.Errorf("proxy ports %v", ports)
	}
	if proxy.LivenessProbe.HTTPGet.Path != "/live" || proxy.ReadinessProbe.HTTPGet.Path != "/ready" ||
		proxy.LivenessProbe.HTTPGet.Port.IntValue() != 4191 {
		t.Errorf("probes %+v %+v", proxy.LivenessProbe, proxy.ReadinessProbe)
	}
	checkProxyEnv(t, proxy)
	var token *corev1.Volume
	for i := range got.Spec.Volumes {
		if got.Spec.Volumes[i].Name == "linkerd-identity-token" {
			token = &got.Spec.Volumes[i]
		}
	}
	if token == nil || token.Projected == nil || token.Projected.Sources[0].ServiceAccountToken.Audience != "identity.l5d.io" {
		t.Errorf("projected token volume missing or wrong: %+v", token)
	}
	for _, v := range orig.Spec.Volumes {
		if got.Spec.Volumes[0].Name != v.Name {
			t.Errorf("user volume %s not first", v.Name)
		}
	}
	if got.Labels[LabelControlPlaneNS] != "linkerd" || got.Labels[LabelWorkloadNS] != "apps" {
		t.Errorf("labels %v", got.Labels)
	}
	if got.Annotations[AnnotationCreatedBy] == "" || got.Annotations[AnnotationTrustRootSHA] == "" {
		t.Errorf("annotations %v", got.Annotations)
	}
	init := got.Spec.InitContainers[0]
	if !strings.Contains(strings.Join(init.Args, " "), "--proxy-uid=2102") || init.SecurityContext.Capabilities == nil {
		t.Errorf("init container %v", init.Args)
	}
	// Both commands are explicit (no image entrypoint relied upon): the proxy built alone,
	// and the capture's subcommand of the meridian binary, whose args are only its flags.
	if !slices.Equal(proxy.Command, []string{"meridian-proxy"}) || len(proxy.Args) != 0 {
		t.Errorf("proxy command %q args %q, want [meridian-proxy] and none", proxy.Command, proxy.Args)
	}
	if !slices.Equal(init.Command, []string{"meridian", "proxy-init"}) || len(init.Args) == 0 || !strings.HasPrefix(init.Args[0], "--") {
		t.Errorf("init command %q args %q, want [meridian proxy-init] and flags", init.Command, init.Args)
	}
}

// checkProxyEnv checks the injected proxy's environment: Linkerd's variables with the
// default install's values, the downward-API ones, and every $(VAR) defined before use.
func checkProxyEnv(t *testing.T, proxy *corev1.Container) {
	t.Helper()
	env := map[string]corev1.EnvVar{}
	for _, e := range proxy.Env {
		env[e.Name] = e
	}
	for name, want := range map[string]string{
		"LINKERD2_PROXY_DESTINATION_SVC_ADDR": "linkerd-dst-headless.linkerd.svc.cluster.local.:8086",
		"LINKERD2_PROXY_IDENTITY_SVC_ADDR":    "linkerd-identity-headless.linkerd.svc.cluster.local.:8080",
		"LINKERD2_PROXY_POLICY_SVC_ADDR":      "linkerd-policy.linkerd.svc.cluster.local.:8090",
		// The identities the control plane serves with (internal/cptls): the policy
		// controller runs under its own ServiceAccount, linkerd-policy.
		"LINKERD2_PROXY_DESTINATION_SVC_NAME":   "linkerd-destination.linkerd.serviceaccount.identity.linkerd.cluster.local",
		"LINKERD2_PROXY_POLICY_SVC_NAME":        "linkerd-policy.linkerd.serviceaccount.identity.linkerd.cluster.local",
		"LINKERD2_PROXY_IDENTITY_SVC_NAME":      "linkerd-identity.linkerd.serviceaccount.identity.linkerd.cluster.local",
		"LINKERD2_PROXY_IDENTITY_TOKEN_FILE":    "/var/run/secrets/tokens/linkerd-identity-token",
		"LINKERD2_PROXY_IDENTITY_LOCAL_NAME":    "$(_pod_sa).$(_pod_ns).serviceaccount.identity.$(_l5d_ns).$(_l5d_trustdomain)",
		"LINKERD2_PROXY_INBOUND_LISTEN_ADDR":    "[::]:4143",
		"LINKERD2_PROXY_OUTBOUND_LISTEN_ADDR":   "127.0.0.1:4140",
		"LINKERD2_PROXY_ADMIN_LISTEN_ADDR":      "[::]:4191",
		"LINKERD2_PROXY_CONTROL_LISTEN_ADDR":    "[::]:4190",
		"LINKERD2_PROXY_INBOUND_PORTS":          "8080,9090",
		"LINKERD2_PROXY_POLICY_WORKLOAD":        `{"ns":"$(_pod_ns)", "pod":"$(_pod_name)"}`,
		"LINKERD2_PROXY_IDENTITY_TRUST_ANCHORS": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
	} {
		if env[name].Value != want {
			t.Errorf("env %s = %q, want %q", name, env[name].Value, want)
		}
	}
	for name, path := range map[string]string{"_pod_name": "metadata.name", "_pod_ns": "metadata.namespace", "_pod_sa": "spec.serviceAccountName"} {
		if e := env[name]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != path {
			t.Errorf("env %s not from downward API %s", name, path)
		}
	}
	// Every $(VAR) reference must name a variable defined before it.
	defined := map[string]bool{}
	for _, e := range proxy.Env {
		for rest := e.Value; ; {
			i := strings.Index(rest, "$(")
			if i < 0 {
				break
			}
			j := strings.Index(rest[i:], ")")
			ref := rest[i+2 : i+j]
			if !defined[ref] {
				t.Errorf("env %s references %s before it is defined", e.Name, ref)
			}
			rest = rest[i+j:]
		}
		defined[e.Name] = true
	}
}

// TestPatchConfiguredCommands: an image without meridian-proxy runs the all-in-one binary's
// `meridian proxy` by configuration, and extra args go before the init container's flags.
func TestPatchConfiguredCommands(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Proxy.Command = []string{"meridian", "proxy"}
	cfg.Proxy.Args = []string{"--enable-pprof"}
	cfg.Proxy.InitCommand = []string{"/usr/local/bin/meridian", "proxy-init"}
	cfg.Proxy.InitArgs = []string{"--iptables-mode=nft"}
	got := injectWeb(t, &cfg)
	init, proxy := got.Spec.InitContainers[0], got.Spec.InitContainers[1]
	if !slices.Equal(proxy.Command, []string{"meridian", "proxy"}) || !slices.Equal(proxy.Args, []string{"--enable-pprof"}) {
		t.Errorf("proxy command %q args %q", proxy.Command, proxy.Args)
	}
	if !slices.Equal(init.Command, []string{"/usr/local/bin/meridian", "proxy-init"}) || len(init.Args) < 2 ||
		init.Args[0] != "--iptables-mode=nft" || !strings.HasPrefix(init.Args[1], "--incoming-proxy-port=") {
		t.Errorf("init command %q args %q", init.Command, init.Args)
	}
}

// injectWeb returns a one-container pod annotated for injection as cfg patches it.
func injectWeb(t *testing.T, cfg *Config) *corev1.Pod {
	t.Helper()
	return injectWebAnnotated(t, cfg, nil)
}

// injectWebAnnotated is injectWeb of a pod that also carries ann.
func injectWebAnnotated(t *testing.T, cfg *Config, ann map[string]string) *corev1.Pod {
	t.Helper()
	pod := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{AnnotationInject: InjectEnabled}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web"}}},
	}
	for k, v := range ann {
		pod.Annotations[k] = v
	}
	out := cfg.Review(Meta{}, "apps", &pod.ObjectMeta, &pod.Spec, false)
	if !out.Decision.Inject {
		t.Fatalf("skipped: %+v", out.Decision)
	}
	return applyPatch(t, &pod, out.Mutation.Patch("", &pod.ObjectMeta, &pod.Spec))
}

// TestPatchClusterNetworks: the configured cluster networks reach the proxy, which needs them
// for its cluster-* default policies; none configured, the variable is not written.
func TestPatchClusterNetworks(t *testing.T) {
	for _, nets := range [][]netip.Prefix{nil, {netip.MustParsePrefix("10.0.0.0/16"), netip.MustParsePrefix("fd00::/8")}} {
		cfg := DefaultConfig()
		cfg.ClusterNetworks = nets
		got := injectWeb(t, &cfg)
		var val *string
		for _, e := range got.Spec.InitContainers[1].Env {
			if e.Name == "LINKERD2_PROXY_POLICY_CLUSTER_NETWORKS" {
				val = &e.Value
			}
		}
		switch {
		case nets == nil && val != nil:
			t.Errorf("no networks configured: LINKERD2_PROXY_POLICY_CLUSTER_NETWORKS=%q", *val)
		case nets != nil && (val == nil || *val != "10.0.0.0/16,fd00::/8"):
			t.Errorf("networks %v: LINKERD2_PROXY_POLICY_CLUSTER_NETWORKS %v", nets, val)
		}
	}
}

func TestPatchIngressAndOverrides(t *testing.T) {
	cfg := DefaultConfig()
	pod := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "gw", Annotations: map[string]string{
			AnnotationInject:            "ingress",
			AnnotationProxyCPULimit:     "1",
			AnnotationProxyLogLevel:     "debug",
			AnnotationSkipInboundPorts:  "9000",
			AnnotationSkipOutboundPorts: "5432,6000-6100",
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "gw"}}},
	}
	out := cfg.Review(Meta{Annotations: map[string]string{AnnotationProxyMemoryRequest: "64Mi"}}, "edge", &pod.ObjectMeta, &pod.Spec, false)
	if !out.Decision.Inject {
		t.Fatalf("skipped: %+v", out.Decision)
	}
	got := applyPatch(t, &pod, out.Mutation.Patch("", &pod.ObjectMeta, &pod.Spec))
	proxy := got.Spec.InitContainers[1]
	env := map[string]string{}
	for _, e := range proxy.Env {
		env[e.Name] = e.Value
	}
	if env["LINKERD2_PROXY_INGRESS_MODE"] != "true" || env["LINKERD2_PROXY_LOG"] != "debug" {
		t.Errorf("env %v", env)
	}
	if proxy.Resources.Limits.Cpu().String() != "1" || proxy.Resources.Requests.Memory().String() != "64Mi" {
		t.Errorf("resources %+v", proxy.Resources)
	}
	args := strings.Join(got.Spec.InitContainers[0].Args, " ")
	for _, want := range []string{"--inbound-ports-to-ignore=4190,4191,9000", "--outbound-ports-to-ignore=5432,6000-6100"} {
		if !strings.Contains(args, want) {
			t.Errorf("init args %q lack %q", args, want)
		}
	}
}

func TestOwnerOf(t *testing.T) {
	for _, tc := range []struct {
		meta metav1.ObjectMeta
		want Owner
	}{
		{metav1.ObjectMeta{Name: "p"}, Owner{"pod", "p"}},
		{metav1.ObjectMeta{GenerateName: "p-"}, Owner{"pod", "p"}},
		{metav1.ObjectMeta{OwnerReferences: controller("ReplicaSet", "web-abc"), Labels: map[string]string{"pod-template-hash": "abc"}}, Owner{"deployment", "web"}},
		{metav1.ObjectMeta{OwnerReferences: controller("ReplicaSet", "web")}, Owner{"replicaset", "web"}},
		{metav1.ObjectMeta{Name: "x", OwnerReferences: []metav1.OwnerReference{{Kind: "Job", Name: "j"}}}, Owner{"pod", "x"}},
	} {
		if got := OwnerOf(&tc.meta); got != tc.want {
			t.Errorf("OwnerOf(%+v) = %+v, want %+v", tc.meta, got, tc.want)
		}
	}
}

// TestPatchCopiesNamespaceConfig: the namespace's config annotations that the pod lacks are
// written onto the pod, as Linkerd's injector does, since the policy controller and the
// destination read them from the pod alone; the pod's own win. A namespace's
// default-inbound-policy: deny used to reach the proxy's environment only, and the
// controller served the pod the cluster default.
func TestPatchCopiesNamespaceConfig(t *testing.T) {
	cfg := DefaultConfig()
	pod := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{
			AnnotationInject:      InjectEnabled,
			AnnotationOpaquePorts: "3306",
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web"}}},
	}
	ns := Meta{Annotations: map[string]string{
		AnnotationDefaultInboundPolicy: "deny",
		AnnotationOpaquePorts:          "5432",
		AnnotationRequireIdentityPorts: "8080",
		AnnotationSkipInboundPorts:     "9000",
		"example.com/other":            "not copied",
	}}
	out := cfg.Review(ns, "apps", &pod.ObjectMeta, &pod.Spec, false)
	if !out.Decision.Inject {
		t.Fatalf("skipped: %+v", out.Decision)
	}
	got := applyPatch(t, &pod, out.Mutation.Patch("", &pod.ObjectMeta, &pod.Spec))
	for key, want := range map[string]string{
		AnnotationDefaultInboundPolicy: "deny",
		AnnotationOpaquePorts:          "3306", // the pod's own
		AnnotationRequireIdentityPorts: "8080",
		AnnotationSkipInboundPorts:     "9000",
		"example.com/other":            "",
	} {
		if v := got.Annotations[key]; v != want {
			t.Errorf("annotation %s = %q, want %q", key, v, want)
		}
	}
}

// TestPatchOwnerLabelIsALabelValue: the proxy's owner label is set only when the owner's
// name is a valid label value. From generateName "web--" it was "web-", and the API server
// refused the pod.
func TestPatchOwnerLabelIsALabelValue(t *testing.T) {
	cfg := DefaultConfig()
	for _, c := range []struct{ generateName, want string }{{"web-", "web"}, {"web--", ""}} {
		pod := corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: c.generateName, Annotations: map[string]string{AnnotationInject: InjectEnabled}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web"}}},
		}
		out := cfg.Review(Meta{}, "apps", &pod.ObjectMeta, &pod.Spec, false)
		if !out.Decision.Inject {
			t.Fatalf("skipped: %+v", out.Decision)
		}
		got := applyPatch(t, &pod, out.Mutation.Patch("", &pod.ObjectMeta, &pod.Spec))
		if v := got.Labels[labelProxyOwnerPrefix+"pod"]; v != c.want {
			t.Errorf("generateName %q: owner label %q, want %q", c.generateName, v, c.want)
		}
	}
}

// TestPatchDefaultOpaquePorts: a pod without config.linkerd.io/opaque-ports gets the default
// opaque ports its containers declare, as Linkerd's injector writes them (the policy
// controller reads the pod's annotation alone); its own or its namespace's list stays.
func TestPatchDefaultOpaquePorts(t *testing.T) {
	cfg := DefaultConfig()
	for _, c := range []struct {
		name    string
		ns, pod map[string]string
		want    string // "" means absent
	}{
		{"the declared default ports", nil, nil, "3306,6379"},
		{"its own list", nil, map[string]string{AnnotationOpaquePorts: "9000"}, "9000"},
		{"its namespace's list", map[string]string{AnnotationOpaquePorts: "9001"}, nil, "9001"},
	} {
		t.Run(c.name, func(t *testing.T) {
			anns := map[string]string{AnnotationInject: InjectEnabled}
			maps.Copy(anns, c.pod)
			pod := corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "db", Annotations: anns},
				Spec: corev1.PodSpec{Containers: []corev1.Container{
					{Name: "mysql", Ports: []corev1.ContainerPort{{ContainerPort: 3306}, {ContainerPort: 8080}}},
					{Name: "cache", Ports: []corev1.ContainerPort{{ContainerPort: 6379}}},
				}},
			}
			out := cfg.Review(Meta{Annotations: c.ns}, "apps", &pod.ObjectMeta, &pod.Spec, false)
			got := applyPatch(t, &pod, out.Mutation.Patch("", &pod.ObjectMeta, &pod.Spec))
			if v := got.Annotations[AnnotationOpaquePorts]; v != c.want {
				t.Errorf("%s = %q, want %q", AnnotationOpaquePorts, v, c.want)
			}
		})
	}
}

// TestPatchNonNativeAwaits: a proxy that is not a native sidecar gets a postStart hook that
// waits for it to be ready, so that the kubelet starts the application after it (linkerd2's
// proxy.await); a native sidecar has its startup probe instead.
func TestPatchNonNativeAwaits(t *testing.T) {
	for _, native := range []bool{false, true} {
		cfg := DefaultConfig()
		cfg.Proxy.NativeSidecar = native
		got := injectWeb(t, &cfg)
		var proxy corev1.Container
		for _, c := range append(got.Spec.InitContainers, got.Spec.Containers...) {
			if c.Name == "linkerd-proxy" {
				proxy = c
			}
		}
		want := []string{"meridian-proxy", "await", "--port=4191", "--timeout=2m"}
		switch {
		case !native && (proxy.Lifecycle == nil || proxy.Lifecycle.PostStart == nil || proxy.Lifecycle.PostStart.Exec == nil ||
			!slices.Equal(proxy.Lifecycle.PostStart.Exec.Command, want)):
			t.Errorf("not native: the proxy's lifecycle %+v, want postStart %q", proxy.Lifecycle, want)
		case native && (proxy.Lifecycle != nil || proxy.StartupProbe == nil):
			t.Errorf("native: lifecycle %+v, startup probe %+v", proxy.Lifecycle, proxy.StartupProbe)
		}
	}
}

// TestNotesOnProxyUser: a container that runs as the proxy's user (by its own security
// context or the pod's) is injected with a note, since its traffic is let out uncaptured.
func TestNotesOnProxyUser(t *testing.T) {
	cfg := DefaultConfig()
	uid, other := cfg.Proxy.UID, int64(1000)
	pod := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{AnnotationInject: InjectEnabled}},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: &uid},
			Containers: []corev1.Container{
				{Name: "app"}, // the pod's user: the proxy's
				{Name: "sidecar", SecurityContext: &corev1.SecurityContext{RunAsUser: &other}},
			},
		},
	}
	out := cfg.Review(Meta{}, "apps", &pod.ObjectMeta, &pod.Spec, false)
	if !out.Decision.Inject || len(out.Notes) != 1 || !strings.Contains(out.Notes[0], `container "app" runs as user 2102`) {
		t.Errorf("inject %v, notes %q; want one note on container app", out.Decision.Inject, out.Notes)
	}
}
