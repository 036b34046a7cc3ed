{{/*
Helpers shared by every component. A component is named by a dict:
  (dict "root" $ "name" "destination" "values" .Values.destination)
*/}}

{{- define "meridian.version" -}}
{{- if contains "@" .Values.image.tag -}}
{{- fail (printf "image.tag %q holds a digest: it takes a tag. Pin by digest with image.name (repository@sha256:...) and proxy.initImage.name (the capture init image's)" (.Values.image.tag | trunc 100)) -}}
{{- end -}}
{{- .Values.image.tag | default .Chart.AppVersion -}}
{{- end }}

{{/* The control plane's image: image.name tagged with the version, or image.name as it is
when it is pinned by digest (repository@sha256:...). */}}
{{- define "meridian.image" -}}
{{- if contains "@" .Values.image.name -}}
{{- .Values.image.name -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.name (include "meridian.version" .) -}}
{{- end -}}
{{- end }}

{{/* The version as a label value: at most 63 characters of [A-Za-z0-9_.-], beginning and
ending with a letter or digit (a tag may hold "+" and be up to 128 characters). */}}
{{- define "meridian.versionLabel" -}}
{{- regexReplaceAll "[^A-Za-z0-9_.-]" (include "meridian.version" .) "_" | trunc 63 | trimAll "_.-" -}}
{{- end }}

{{/* Labels that select a component's pods; never change them: selectors are immutable. */}}
{{- define "meridian.selectorLabels" -}}
linkerd.io/control-plane-component: {{ .name }}
linkerd.io/control-plane-ns: {{ .root.Release.Namespace }}
{{- end }}

{{- define "meridian.labels" -}}
{{ include "meridian.selectorLabels" . }}
app.kubernetes.io/name: meridian
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .name }}
app.kubernetes.io/part-of: meridian
app.kubernetes.io/version: {{ include "meridian.versionLabel" .root | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{- end }}

{{/* Labels of objects that belong to the whole control plane rather than one component. */}}
{{- define "meridian.commonLabels" -}}
linkerd.io/control-plane-ns: {{ .Release.Namespace }}
app.kubernetes.io/name: meridian
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: meridian
app.kubernetes.io/version: {{ include "meridian.versionLabel" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* The pod IP as it appears in a listen address: $(POD_IP), or [$(POD_IP)] for IPv6. */}}
{{- /* The destination StatefulSet's replica count. The count the StatefulSet has now (read
with lookup) is kept where the values do not set one: under the HorizontalPodAutoscaler, which
owns the count (minReplicas on a first install), and with destination.replicas unset. So an
upgrade that turns autoscaling on or off, or follows a `kubectl scale`, does not drop the field
or reset it, which would take every replica but one out of the ring at once. A first install,
or a render that cannot read the cluster, starts at 1 (minReplicas under the autoscaler). */}}
{{- define "meridian.destinationReplicas" -}}
{{- $current := lookup "apps/v1" "StatefulSet" .Release.Namespace "linkerd-destination" | default dict -}}
{{- if .Values.destination.autoscaling.enabled -}}
{{- dig "spec" "replicas" .Values.destination.autoscaling.minReplicas $current -}}
{{- else if not (kindIs "invalid" .Values.destination.replicas) -}}
{{- .Values.destination.replicas -}}
{{- else -}}
{{- dig "spec" "replicas" 1 $current -}}
{{- end -}}
{{- end -}}

{{- define "meridian.podIP" -}}
{{- if eq .Values.podIPFamily "IPv6" -}}[$(POD_IP)]{{- else -}}$(POD_IP){{- end -}}
{{- end }}

{{/* Cluster-scoped objects carry the namespace so that two control planes do not collide. */}}
{{- define "meridian.clusterName" -}}
{{- printf "linkerd-%s-%s" .root.Release.Namespace .name -}}
{{- end }}

{{/*
The bytes of a Kubernetes memory quantity (512Mi, 1Gi, 1.5G, 1e9, 1048576), or fail.
*/}}
{{- define "meridian.quantityBytes" -}}
{{- $q := toString . -}}
{{- if kindIs "float64" . -}}{{- $q = printf "%.0f" . -}}{{- end -}}{{- /* a plain number in a values file */ -}}
{{- $m := regexFind "^[0-9]+(\\.[0-9]+)?([eE][+]?[0-9]+)?" $q -}}
{{- if not $m -}}{{- fail (printf "memory limit %q is not a quantity such as 512Mi" $q) -}}{{- end -}}
{{- $suffix := trimPrefix $m $q -}}
{{- $mult := dict "" 1 "k" 1000 "K" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 -}}
{{- if not (hasKey $mult $suffix) -}}{{- fail (printf "memory limit %q: unknown suffix %q (want Ki, Mi, Gi, Ti, k, M, G or T)" $q $suffix) -}}{{- end -}}
{{- mulf (float64 $m) (index $mult $suffix) | int64 -}}
{{- end }}

{{/*
The environment every control-plane container gets: its pod's name, namespace and IP from the
downward API, and GOMEMLIMIT at goMemLimitRatio of its memory limit when it has one.
*/}}
{{- define "meridian.env" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
{{- $limits := dig "resources" "limits" dict .values }}
{{- if hasKey $limits "memory" }}
- name: GOMEMLIMIT
  value: {{ mulf (include "meridian.quantityBytes" $limits.memory | float64) .root.Values.goMemLimitRatio | floor | int64 | quote }}
{{- end }}
{{- end }}

{{/* Probes on a component's admin port. */}}
{{- define "meridian.probes" -}}
livenessProbe:
  httpGet:
    path: /live
    port: admin-http
  initialDelaySeconds: 10
  periodSeconds: 10
  failureThreshold: 3
readinessProbe:
  httpGet:
    path: /ready
    port: admin-http
  periodSeconds: 5
  failureThreshold: 3
{{- end }}

{{- define "meridian.containerSecurity" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop: [ALL]
{{- end }}

{{/* The pod-level settings every component shares: scheduling, anti-affinity, pull secrets. */}}
{{- define "meridian.podSpec" -}}
serviceAccountName: linkerd-{{ .name }}
automountServiceAccountToken: true
enableServiceLinks: false
# Secret volumes are group-readable through fsGroup.
securityContext:
  runAsNonRoot: true
  runAsUser: 2103
  runAsGroup: 2103
  fsGroup: 2103
  seccompProfile:
    type: RuntimeDefault
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
{{ toYaml . }}
{{- end }}
{{- with .root.Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .root.Values.nodeSelector }}
nodeSelector:
{{ toYaml . | indent 2 }}
{{- end }}
{{- with .root.Values.tolerations }}
tolerations:
{{ toYaml . }}
{{- end }}
{{- if .root.Values.enablePodAntiAffinity }}
affinity:
  podAntiAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
    - topologyKey: kubernetes.io/hostname
      labelSelector:
        matchLabels:
{{ include "meridian.selectorLabels" . | indent 10 }}
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: topology.kubernetes.io/zone
        labelSelector:
          matchLabels:
{{ include "meridian.selectorLabels" . | indent 12 }}
{{- end }}
{{- end }}

{{/* Pod template metadata of a component. */}}
{{- define "meridian.podMeta" -}}
labels:
{{ include "meridian.labels" . | indent 2 }}
{{- with .root.Values.podLabels }}
{{ toYaml . | indent 2 }}
{{- end }}
{{- with .root.Values.podAnnotations }}
annotations:
{{ toYaml . | indent 2 }}
{{- end }}
{{- end }}

{{/* A PodDisruptionBudget for a component, when enabled. */}}
{{- define "meridian.pdb" -}}
{{- if .root.Values.enablePodDisruptionBudget }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: linkerd-{{ .name }}
  namespace: {{ .root.Release.Namespace }}
  labels:
{{ include "meridian.labels" . | indent 4 }}
spec:
  maxUnavailable: 1
  selector:
    matchLabels:
{{ include "meridian.selectorLabels" . | indent 6 }}
{{- end }}
{{- end }}

{{/* The common flags of every server. */}}
{{- define "meridian.logFlags" -}}
- --log-level={{ .Values.logLevel }}
- --log-format={{ .Values.logFormat }}
{{- end }}

{{/*
The control-plane TLS of a server whose certificate comes from identity (destination,
policy): its flags (the identity service, the trust anchors and token mounted by
meridian.identityVolumes, its own identity as linkerd-<name>, and with
controlPlaneTLS.localListeners a plaintext listener on 127.0.0.1 at its gRPC port).
  (dict "root" $ "name" "destination" "port" 8086)
*/}}
{{- define "meridian.tlsFlags" -}}
{{- $ns := .root.Release.Namespace -}}
{{- $td := .root.Values.identityTrustDomain -}}
- --identity-addr=linkerd-identity-headless.{{ $ns }}.svc.{{ .root.Values.clusterDomain }}.:8080
- --identity-svc-name=linkerd-identity.{{ $ns }}.serviceaccount.identity.{{ $ns }}.{{ $td }}
- --identity-name=linkerd-{{ .name }}.{{ $ns }}.serviceaccount.identity.{{ $ns }}.{{ $td }}
- --identity-trust-anchors=/var/run/linkerd/identity/trust-roots/ca-bundle.crt
- --identity-token-file=/var/run/secrets/tokens/linkerd-identity-token
{{- if .root.Values.controlPlaneTLS.localListeners }}
- --local-addr=127.0.0.1:{{ .port }}
{{- end }}
{{- end }}

{{/* The mounts of meridian.identityVolumes. */}}
{{- define "meridian.identityVolumeMounts" -}}
- name: linkerd-identity-token
  mountPath: /var/run/secrets/tokens
  readOnly: true
- name: trust-roots
  mountPath: /var/run/linkerd/identity/trust-roots
  readOnly: true
{{- end }}

{{/*
The volumes of a server whose certificate comes from identity: its ServiceAccount token for
identity (projected, audience identity.l5d.io, 24 h: the kubelet renews it, and it is read
before every certificate request) and the trust anchors ConfigMap.
*/}}
{{- define "meridian.identityVolumes" -}}
- name: linkerd-identity-token
  projected:
    sources:
    - serviceAccountToken:
        path: linkerd-identity-token
        expirationSeconds: 86400
        audience: identity.l5d.io
- name: trust-roots
  configMap:
    name: linkerd-identity-trust-roots
    items:
    - key: ca-bundle.crt
      path: ca-bundle.crt
{{- end }}

{{/* The cluster's default inbound policy: proxy.defaultInboundPolicy, which policy.defaultAllowPolicy
(an older name) may repeat but not contradict: the policy controller and the proxies would
then disagree until the controller answers. */}}
{{- define "meridian.defaultInboundPolicy" -}}
{{- $p := .Values.proxy.defaultInboundPolicy -}}
{{- with .Values.policy.defaultAllowPolicy -}}
{{- if ne . $p -}}
{{- fail (printf "policy.defaultAllowPolicy (%s) differs from proxy.defaultInboundPolicy (%s): set proxy.defaultInboundPolicy, which both the policy controller and the proxies use" . $p) -}}
{{- end -}}
{{- end -}}
{{- $p -}}
{{- end }}
