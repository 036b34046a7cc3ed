package injector

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/meridian-mesh/meridian/translator"
)

// Owner is the workload a pod belongs to, as far as the pod itself tells: its controller
// reference, with a ReplicaSet that carries the pod-template-hash suffix reported as its
// Deployment. A pod without a controller is its own owner (Kind "pod").
type Owner struct {
	Kind string // lower case: deployment, statefulset, daemonset, job, pod, ...
	Name string
}

// OwnerOf derives the owner from a pod's metadata.
func OwnerOf(meta *metav1.ObjectMeta) Owner {
	for _, ref := range meta.OwnerReferences {
		if ref.Controller == nil || !*ref.Controller {
			continue
		}
		kind, name := strings.ToLower(ref.Kind), ref.Name
		if kind == "replicaset" {
			if h := meta.Labels[labelPodTemplateHash]; h != "" && strings.HasSuffix(name, "-"+h) {
				return Owner{Kind: "deployment", Name: strings.TrimSuffix(name, "-"+h)}
			}
		}
		return Owner{Kind: kind, Name: name}
	}
	name := meta.Name
	if name == "" {
		name = strings.TrimSuffix(meta.GenerateName, "-")
	}
	return Owner{Kind: "pod", Name: name}
}

// Mutation is what injecting adds to a pod: containers prepended in order, volumes
// appended, labels and annotations set. It is a plain value; ApplyTo and Patch both derive
// from it so the webhook's patch and `meridian inject --manual` cannot disagree.
type Mutation struct {
	InitContainers []corev1.Container // prepended to spec.initContainers, in this order
	Containers     []corev1.Container // prepended to spec.containers, in this order
	Volumes        []corev1.Volume    // appended to spec.volumes
	Labels         map[string]string
	Annotations    map[string]string
	// RemoveAnnotations are the pod's own annotations to remove: those it carried with a value
	// that was ignored, where the default applies (see ReviewOwned).
	RemoveAnnotations []string
}

// Build returns the mutation that injects the proxy with values v into workload w (whose
// decision d must say Inject) owned by owner.
func (c *Config) Build(d Decision, v Values, w Workload, owner Owner) Mutation {
	proxy := c.proxyContainer(d, v, w)
	init := c.initContainer(v)
	m := Mutation{
		Volumes: []corev1.Volume{
			{Name: volumeXtablesLock, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: volumeIdentityEndEnt, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
			{Name: volumeIdentityToken, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
					Audience:          identityTokenAudience,
					ExpirationSeconds: ptr(identityTokenExpirySec),
					Path:              "linkerd-identity-token",
				}}},
			}}},
		},
		Labels: map[string]string{
			LabelControlPlaneNS: c.ControlPlaneNamespace,
		},
		Annotations: map[string]string{
			AnnotationCreatedBy:    c.CreatedBy,
			AnnotationProxyVersion: v.Version,
		},
	}
	if w.Namespace != "" {
		m.Labels[LabelWorkloadNS] = w.Namespace
	}
	if owner.Kind != "" && owner.Name != "" && len(validation.IsValidLabelValue(owner.Name)) == 0 {
		// Not every owner name is a label value ("web-" from generateName "web--"): such a
		// label would have the API server refuse the pod.
		m.Labels[labelProxyOwnerPrefix+owner.Kind] = owner.Name
	}
	if sum := c.trustRootSHA256(); sum != "" {
		m.Annotations[AnnotationTrustRootSHA] = sum
	}
	if v.NativeSidecar {
		always := corev1.ContainerRestartPolicyAlways
		proxy.RestartPolicy = &always
		// The kubelet starts the pod's other containers once this probe passes.
		proxy.StartupProbe = &corev1.Probe{
			ProbeHandler:     httpGet("/ready", v.AdminPort),
			PeriodSeconds:    1,
			FailureThreshold: 120,
			TimeoutSeconds:   1,
		}
		m.InitContainers = []corev1.Container{init, proxy}
	} else {
		// The kubelet starts the next container once this hook returns: the application
		// after its proxy is ready (linkerd2's linkerd-await, proxy.await).
		await := append(slices.Clone(c.Proxy.Command), "await", fmt.Sprintf("--port=%d", v.AdminPort), "--timeout=2m")
		proxy.Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: await}}}
		m.InitContainers = []corev1.Container{init}
		m.Containers = []corev1.Container{proxy}
	}
	return m
}

func ptr[T any](v T) *T { return &v }

func httpGet(path string, port int32) corev1.ProbeHandler {
	return corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(port)}}
}

func (c *Config) proxyContainer(d Decision, v Values, w Workload) corev1.Container {
	env := []corev1.EnvVar{
		fieldEnv("_pod_name", "metadata.name"),
		fieldEnv("_pod_ns", "metadata.namespace"),
		fieldEnv("_pod_nodeName", "spec.nodeName"),
		fieldEnv("_pod_sa", "spec.serviceAccountName"),
		fieldEnv("_pod_ips", "status.podIPs"),
		{Name: "_l5d_ns", Value: c.ControlPlaneNamespace},
		{Name: "_l5d_trustdomain", Value: c.TrustDomain},
		{Name: "LINKERD2_PROXY_LOG", Value: v.LogLevel},
		{Name: "LINKERD2_PROXY_LOG_FORMAT", Value: v.LogFormat},
		{Name: "LINKERD2_PROXY_DESTINATION_SVC_ADDR", Value: c.svcAddr(c.DestinationService, c.DestinationPort)},
		{Name: "LINKERD2_PROXY_DESTINATION_SVC_NAME", Value: c.saIdentity(c.DestinationSA)},
		{Name: "LINKERD2_PROXY_DESTINATION_PROFILE_SUFFIXES", Value: "svc." + c.ClusterDomain + "."},
		{Name: "LINKERD2_PROXY_DESTINATION_CONTEXT", Value: `{"ns":"$(_pod_ns)", "nodeName":"$(_pod_nodeName)", "pod":"$(_pod_name)"}`},
		{Name: "LINKERD2_PROXY_POLICY_SVC_ADDR", Value: c.svcAddr(c.PolicyService, c.PolicyPort)},
		{Name: "LINKERD2_PROXY_POLICY_SVC_NAME", Value: c.saIdentity(c.PolicySA)},
		{Name: "LINKERD2_PROXY_POLICY_WORKLOAD", Value: `{"ns":"$(_pod_ns)", "pod":"$(_pod_name)"}`},
		{Name: "LINKERD2_PROXY_INBOUND_DEFAULT_POLICY", Value: v.DefaultInbound},
		{Name: "LINKERD2_PROXY_INBOUND_IPS", Value: "$(_pod_ips)"},
		{Name: "LINKERD2_PROXY_CONTROL_LISTEN_ADDR", Value: fmt.Sprintf("[::]:%d", v.ControlPort)},
		{Name: "LINKERD2_PROXY_ADMIN_LISTEN_ADDR", Value: fmt.Sprintf("[::]:%d", v.AdminPort)},
		{Name: "LINKERD2_PROXY_OUTBOUND_LISTEN_ADDR", Value: fmt.Sprintf("127.0.0.1:%d", v.OutboundPort)},
		{Name: translator.EnvInboundListenAddr, Value: fmt.Sprintf("[::]:%d", v.InboundPort)},
	}
	if ports := appPorts(w.Spec); ports != "" {
		env = append(env, corev1.EnvVar{Name: "LINKERD2_PROXY_INBOUND_PORTS", Value: ports})
	}
	if len(c.ClusterNetworks) > 0 {
		nets := make([]string, len(c.ClusterNetworks))
		for i, p := range c.ClusterNetworks {
			nets[i] = p.String()
		}
		env = append(env, corev1.EnvVar{Name: "LINKERD2_PROXY_POLICY_CLUSTER_NETWORKS", Value: strings.Join(nets, ",")})
	}
	if d.Mode == InjectIngress {
		env = append(env, corev1.EnvVar{Name: "LINKERD2_PROXY_INGRESS_MODE", Value: "true"})
	}
	env = append(env,
		corev1.EnvVar{Name: "LINKERD2_PROXY_IDENTITY_DIR", Value: identityEndEntityDir},
		corev1.EnvVar{Name: "LINKERD2_PROXY_IDENTITY_TRUST_ANCHORS", Value: c.TrustAnchorsPEM},
		corev1.EnvVar{Name: "LINKERD2_PROXY_IDENTITY_TOKEN_FILE", Value: identityTokenFile},
		corev1.EnvVar{Name: "LINKERD2_PROXY_IDENTITY_SVC_ADDR", Value: c.svcAddr(c.IdentityService, c.IdentityPort)},
		corev1.EnvVar{Name: "LINKERD2_PROXY_IDENTITY_LOCAL_NAME", Value: "$(_pod_sa).$(_pod_ns).serviceaccount.identity.$(_l5d_ns).$(_l5d_trustdomain)"},
		corev1.EnvVar{Name: "LINKERD2_PROXY_IDENTITY_SVC_NAME", Value: c.saIdentity(c.IdentitySA)},
	)
	sc := &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr(false),
		ReadOnlyRootFilesystem:   ptr(true),
		RunAsNonRoot:             ptr(true),
		RunAsUser:                ptr(v.UID),
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	if v.GID >= 0 {
		sc.RunAsGroup = ptr(v.GID)
	}
	return corev1.Container{
		Name:            ProxyContainerName,
		Image:           v.Image,
		ImagePullPolicy: v.ImagePullPolicy,
		Command:         append([]string(nil), c.Proxy.Command...),
		Args:            append([]string(nil), c.Proxy.Args...),
		Env:             env,
		Ports: []corev1.ContainerPort{
			{Name: "linkerd-proxy", ContainerPort: v.InboundPort, Protocol: corev1.ProtocolTCP},
			{Name: "linkerd-admin", ContainerPort: v.AdminPort, Protocol: corev1.ProtocolTCP},
		},
		LivenessProbe: &corev1.Probe{
			ProbeHandler: httpGet("/live", v.AdminPort), InitialDelaySeconds: 10, TimeoutSeconds: 1,
		},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler: httpGet("/ready", v.AdminPort), InitialDelaySeconds: 2, TimeoutSeconds: 1,
		},
		Resources:                v.Resources,
		SecurityContext:          sc,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		VolumeMounts: []corev1.VolumeMount{
			{Name: volumeIdentityEndEnt, MountPath: identityEndEntityDir},
			{Name: volumeIdentityToken, MountPath: identityTokenDir},
		},
	}
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

// appPorts lists the application's declared container ports, sorted, comma-separated.
func appPorts(spec *corev1.PodSpec) string {
	seen := map[int32]bool{}
	var ports []int
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			if p.ContainerPort > 0 && !seen[p.ContainerPort] {
				seen[p.ContainerPort] = true
				ports = append(ports, int(p.ContainerPort))
			}
		}
	}
	sort.Ints(ports)
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ",")
}

func (c *Config) initContainer(v Values) corev1.Container {
	ignoreIn := append([]string{strconv.Itoa(int(v.ControlPort)), strconv.Itoa(int(v.AdminPort))}, v.SkipInbound...)
	args := append([]string(nil), c.Proxy.InitArgs...)
	args = append(args,
		fmt.Sprintf("--incoming-proxy-port=%d", v.InboundPort),
		fmt.Sprintf("--outgoing-proxy-port=%d", v.OutboundPort),
		fmt.Sprintf("--proxy-uid=%d", v.UID),
		"--inbound-ports-to-ignore="+strings.Join(ignoreIn, ","),
	)
	if len(v.SkipOutbound) > 0 {
		args = append(args, "--outbound-ports-to-ignore="+strings.Join(v.SkipOutbound, ","))
	}
	return corev1.Container{
		Name:            InitContainerName,
		Image:           v.InitImage,
		ImagePullPolicy: v.ImagePullPolicy,
		Command:         append([]string(nil), c.Proxy.InitCommand...),
		Args:            args,
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("10m"),
				corev1.ResourceMemory: resource.MustParse("10Mi"),
			},
			Limits: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("100m"),
				corev1.ResourceMemory: resource.MustParse("50Mi"),
			},
		},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr(false),
			Privileged:               ptr(false),
			ReadOnlyRootFilesystem:   ptr(true),
			RunAsNonRoot:             ptr(false),
			RunAsUser:                ptr(int64(0)),
			Capabilities:             &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "NET_RAW"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		VolumeMounts:             []corev1.VolumeMount{{Name: volumeXtablesLock, MountPath: "/run"}},
	}
}

// ApplyTo performs the mutation on meta and spec in place.
func (m *Mutation) ApplyTo(meta *metav1.ObjectMeta, spec *corev1.PodSpec) {
	if len(m.InitContainers) > 0 {
		spec.InitContainers = append(append([]corev1.Container(nil), m.InitContainers...), spec.InitContainers...)
	}
	if len(m.Containers) > 0 {
		spec.Containers = append(append([]corev1.Container(nil), m.Containers...), spec.Containers...)
	}
	spec.Volumes = append(spec.Volumes, m.Volumes...)
	if len(m.Labels) > 0 && meta.Labels == nil {
		meta.Labels = map[string]string{}
	}
	for k, v := range m.Labels {
		meta.Labels[k] = v
	}
	if len(m.Annotations) > 0 && meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	for k, v := range m.Annotations {
		meta.Annotations[k] = v
	}
	for _, k := range m.RemoveAnnotations {
		delete(meta.Annotations, k)
	}
}
