package injector

import "github.com/meridian-mesh/meridian/translator"

// Annotation and label keys the injector reads or writes. They are Linkerd's, so that
// existing manifests work unchanged.
const (
	// AnnotationInject is linkerd.io/inject: enabled, ingress or disabled.
	AnnotationInject = "linkerd.io/inject"

	AnnotationCreatedBy      = "linkerd.io/created-by"
	AnnotationProxyVersion   = "linkerd.io/proxy-version"
	AnnotationTrustRootSHA   = "linkerd.io/trust-root-sha256"
	LabelControlPlaneNS      = "linkerd.io/control-plane-ns"
	LabelWorkloadNS          = "linkerd.io/workload-ns"
	LabelControlPlaneComp    = "linkerd.io/control-plane-component"
	LabelAdmissionWebhooks   = "config.linkerd.io/admission-webhooks"
	labelProxyOwnerPrefix    = "linkerd.io/proxy-"
	labelPodTemplateHash     = "pod-template-hash"
	namespaceKubeSystem      = "kube-system"
	admissionWebhooksDisable = "disabled"
)

// Values of linkerd.io/inject.
const (
	InjectEnabled  = "enabled"
	InjectIngress  = "ingress"
	InjectDisabled = "disabled"
)

// config.linkerd.io/* overrides honoured on pods and, flowing down, on namespaces.
const (
	AnnotationProxyImage            = "config.linkerd.io/proxy-image"
	AnnotationProxyVersionOverride  = "config.linkerd.io/proxy-version"
	AnnotationProxyInitImage        = "config.linkerd.io/proxy-init-image"
	AnnotationProxyInitImageVersion = "config.linkerd.io/proxy-init-image-version"
	AnnotationProxyImagePullPolicy  = "config.linkerd.io/image-pull-policy"
	AnnotationProxyCPURequest       = "config.linkerd.io/proxy-cpu-request"
	AnnotationProxyCPULimit         = "config.linkerd.io/proxy-cpu-limit"
	AnnotationProxyMemoryRequest    = "config.linkerd.io/proxy-memory-request"
	AnnotationProxyMemoryLimit      = "config.linkerd.io/proxy-memory-limit"
	AnnotationProxyEphemeralRequest = "config.linkerd.io/proxy-ephemeral-storage-request"
	AnnotationProxyEphemeralLimit   = "config.linkerd.io/proxy-ephemeral-storage-limit"
	AnnotationProxyLogLevel         = "config.linkerd.io/proxy-log-level"
	AnnotationProxyLogFormat        = "config.linkerd.io/proxy-log-format"
	AnnotationProxyUID              = "config.linkerd.io/proxy-uid"
	AnnotationProxyGID              = "config.linkerd.io/proxy-gid"
	AnnotationProxyInboundPort      = "config.linkerd.io/proxy-inbound-port"
	AnnotationProxyOutboundPort     = "config.linkerd.io/proxy-outbound-port"
	AnnotationProxyAdminPort        = "config.linkerd.io/proxy-admin-port"
	AnnotationProxyControlPort      = "config.linkerd.io/proxy-control-port"
	AnnotationSkipInboundPorts      = "config.linkerd.io/skip-inbound-ports"
	AnnotationSkipOutboundPorts     = "config.linkerd.io/skip-outbound-ports"
	AnnotationNativeSidecar         = "config.linkerd.io/proxy-enable-native-sidecar"
	AnnotationDefaultInboundPolicy  = "config.linkerd.io/default-inbound-policy"
)

// ProxyAnnotations lists every config.linkerd.io/* override the injector honours, in a
// fixed order. Each also names a metric label (see metricLabelName).
var ProxyAnnotations = []string{
	AnnotationProxyImage,
	AnnotationProxyVersionOverride,
	AnnotationProxyInitImage,
	AnnotationProxyInitImageVersion,
	AnnotationProxyImagePullPolicy,
	AnnotationProxyCPURequest,
	AnnotationProxyCPULimit,
	AnnotationProxyMemoryRequest,
	AnnotationProxyMemoryLimit,
	AnnotationProxyEphemeralRequest,
	AnnotationProxyEphemeralLimit,
	AnnotationProxyLogLevel,
	AnnotationProxyLogFormat,
	AnnotationProxyUID,
	AnnotationProxyGID,
	AnnotationProxyInboundPort,
	AnnotationProxyOutboundPort,
	AnnotationProxyAdminPort,
	AnnotationProxyControlPort,
	AnnotationSkipInboundPorts,
	AnnotationSkipOutboundPorts,
	AnnotationNativeSidecar,
	AnnotationDefaultInboundPolicy,
}

// Annotations that the policy controller and the destination read from pods, which the
// injector does not itself apply.
const (
	AnnotationOpaquePorts          = "config.linkerd.io/opaque-ports"
	AnnotationRequireIdentityPorts = "config.linkerd.io/proxy-require-identity-inbound-ports"
)

// NamespaceCopied are the annotations a pod receives from its namespace when it has none of
// its own, as Linkerd's injector copies them (AppendNamespaceAnnotations): the policy
// controller and the destination read them from the pod alone, so a namespace's
// default-inbound-policy: deny, say, would otherwise reach the proxy's environment but not
// the policy the controller serves it.
var NamespaceCopied = append(append([]string(nil), ProxyAnnotations...), AnnotationOpaquePorts, AnnotationRequireIdentityPorts)

// Skip reasons: the value of Decision.Reason and of the skip_reason metric label.
const (
	ReasonAnnotationAbsent       = "injection_enable_annotation_absent"
	ReasonDisableAnnotation      = "injection_disable_annotation_present"
	ReasonHostNetwork            = "host_network_enabled"
	ReasonSidecarExists          = "sidecar_already_exists"
	ReasonInvalidAtNamespace     = "invalid_inject_annotation_at_ns"
	ReasonInvalidAtWorkload      = "invalid_inject_annotation_at_workload"
	ReasonAdmissionWebhooksOff   = "admission_webhooks_disabled"
	ReasonKubeSystem             = "kube_system_namespace"
	ReasonControlPlaneComponent  = "control_plane_component"
	ReasonInvalidProxyConfig     = "invalid_proxy_config_annotation"
	ReasonUnsupportedResource    = "unsupported_resource"
	ReasonUnsupportedOperation   = "unsupported_operation"
	ReasonInvalidPod             = "invalid_pod"
	ReasonNamespaceLookupFailure = "namespace_lookup_failed"
)

// Where the effective linkerd.io/inject came from: the annotation_at metric label.
const (
	AtNamespace = "namespace"
	AtWorkload  = "workload"
)

// Container and volume names, as Linkerd's. The proxy container's name is the one the
// destination looks for when it reads a pod's proxy inbound port (translator.ProxyInboundPort).
const (
	ProxyContainerName     = translator.ProxyContainerName
	InitContainerName      = "linkerd-init"
	volumeXtablesLock      = "linkerd-proxy-init-xtables-lock"
	volumeIdentityEndEnt   = "linkerd-identity-end-entity"
	volumeIdentityToken    = "linkerd-identity-token"
	identityEndEntityDir   = "/var/run/linkerd/identity/end-entity"
	identityTokenDir       = "/var/run/secrets/tokens"
	identityTokenFile      = identityTokenDir + "/linkerd-identity-token"
	identityTokenAudience  = "identity.l5d.io"
	identityTokenExpirySec = int64(86400)
)
