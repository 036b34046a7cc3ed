package charttest

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Node capacity the stand-in reports for a resourceFieldRef of a container without a limit,
// as a kubelet reports its node's allocatable.
var (
	nodeCPU    = resource.MustParse("2")
	nodeMemory = resource.MustParse("8Gi")
)

// expand does Kubernetes' $(VAR) expansion of env values, command and args: $(NAME) becomes
// the value of an earlier variable (and stays as it is when there is none), $$ becomes $.
func expand(s string, lookup func(string) (string, bool)) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// fieldValue is the downward API's value of a fieldRef path for pod.
func fieldValue(pod *corev1.Pod, path string) (string, error) {
	if k, ok := strings.CutPrefix(path, "metadata.labels['"); ok {
		return pod.Labels[strings.TrimSuffix(k, "']")], nil
	}
	if k, ok := strings.CutPrefix(path, "metadata.annotations['"); ok {
		return pod.Annotations[strings.TrimSuffix(k, "']")], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP":
		return pod.Status.HostIP, nil
	case "status.podIP":
		return pod.Status.PodIP, nil
	case "status.podIPs":
		ips := make([]string, len(pod.Status.PodIPs))
		for i, ip := range pod.Status.PodIPs {
			ips[i] = ip.IP
		}
		return strings.Join(ips, ","), nil
	}
	return "", fmt.Errorf("fieldRef %q is not emulated", path)
}

func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%q\n", k, m[k])
	}
	return b.String()
}

// resourceValue is the downward API's value of a resourceFieldRef: the container's limit (or
// the node's capacity without one) or request, divided by the divisor and rounded up.
func resourceValue(pod *corev1.Pod, containerName string, ref *corev1.ResourceFieldSelector) (string, error) {
	if ref.ContainerName != "" {
		containerName = ref.ContainerName
	}
	var c *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == containerName {
			c = &pod.Spec.Containers[i]
		}
	}
	if c == nil {
		return "", fmt.Errorf("resourceFieldRef: no container %q", containerName)
	}
	var q resource.Quantity
	var ok bool
	switch ref.Resource {
	case "limits.cpu":
		if q, ok = c.Resources.Limits[corev1.ResourceCPU]; !ok {
			q = nodeCPU
		}
	case "limits.memory":
		if q, ok = c.Resources.Limits[corev1.ResourceMemory]; !ok {
			q = nodeMemory
		}
	case "requests.cpu":
		q = c.Resources.Requests[corev1.ResourceCPU]
	case "requests.memory":
		q = c.Resources.Requests[corev1.ResourceMemory]
	default:
		return "", fmt.Errorf("resourceFieldRef %q is not emulated", ref.Resource)
	}
	div := ref.Divisor
	if div.IsZero() {
		div = resource.MustParse("1")
	}
	if strings.HasSuffix(ref.Resource, ".cpu") {
		return strconv.FormatInt((q.MilliValue()+div.MilliValue()-1)/div.MilliValue(), 10), nil
	}
	return strconv.FormatInt((q.Value()+div.Value()-1)/div.Value(), 10), nil
}

// envLookup resolves the envFrom and env of one container, in order, as a kubelet does.
type envLookup struct {
	vars  map[string]string
	order []string
}

func (e *envLookup) set(k, v string) {
	if _, ok := e.vars[k]; !ok {
		e.order = append(e.order, k)
	}
	e.vars[k] = v
}

func (e *envLookup) get(k string) (string, bool) {
	v, ok := e.vars[k]
	return v, ok
}

func (e *envLookup) list() []string {
	out := make([]string, 0, len(e.order))
	for _, k := range e.order {
		out = append(out, k+"="+e.vars[k])
	}
	return out
}
