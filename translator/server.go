package translator

import (
	"errors"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/meridian-mesh/meridian/internal/quote"
	"github.com/meridian-mesh/meridian/internal/serverspec"
)

// ProxyProtocolOpaque is the proxyProtocol of a Server whose ports are opaque.
const ProxyProtocolOpaque = "opaque"

// ServerObject is a policy.linkerd.io Server as written (v1beta3, whose older versions are
// subsets), for decoding: every field of its spec, so that a strict decoder refuses a typo.
type ServerObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ServerSpec `json:"spec"`
}

// ServerSpec is the spec of a Server as written (serverspec's, which the policy controller
// reads too).
type ServerSpec = serverspec.Spec

// Server is what the destination keeps of a Server (its projection): its identity, the pods
// it selects, the port and the protocol. Only a Server with proxyProtocol opaque changes what
// the destination serves (ServerOpaque). A Server is immutable once made; it is a
// runtime.Object so that an informer's cache can hold it in place of the object.
type Server struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	// Selector selects the Server's pods; nil when it selects none (no pod selector, as for
	// a Server of external workloads).
	Selector labels.Selector
	// Port is the port number, or the name of a container port.
	Port          intstr.IntOrString
	ProxyProtocol string
	// Problem says why the Server is invalid ("" when it is not); an invalid Server selects
	// nothing.
	Problem string
}

var _ runtime.Object = (*Server)(nil)

// DeepCopyObject implements runtime.Object. A Server is immutable, so the copy shares its
// selector and maps.
func (s *Server) DeepCopyObject() runtime.Object {
	c := *s
	return &c
}

// ProjectServer returns the projection of a Server, or an error saying what makes it invalid:
// serverspec.Check's reason (the policy controller refuses those Servers too), or a
// pod selector that does not parse as a Kubernetes label selector (as Linkerd's destination
// parses it). accessPolicy's value is not checked: it decides no port's opacity. The projection of an invalid
// Server is still returned: it selects nothing.
func ProjectServer(o *ServerObject) (*Server, error) {
	if o == nil {
		return nil, errors.New("no Server")
	}
	s := &Server{
		TypeMeta:      metav1.TypeMeta{Kind: o.Kind, APIVersion: o.APIVersion},
		ObjectMeta:    slimMeta(&o.ObjectMeta, nil, nil),
		ProxyProtocol: o.Spec.ProxyProtocol,
	}
	if o.Spec.Port != nil {
		s.Port = *o.Spec.Port
	}
	_, version, _ := strings.Cut(o.APIVersion, "/")
	err := serverspec.Check(version, &o.Spec)
	if err == nil && o.Spec.PodSelector != nil {
		if s.Selector, err = metav1.LabelSelectorAsSelector(o.Spec.PodSelector); err != nil {
			err = fmt.Errorf("spec.podSelector: %s", quote.Message(err.Error()))
		}
	}
	if err != nil {
		s.Selector, s.Problem = nil, err.Error()
		return s, err
	}
	return s, nil
}

// ServerFromUnstructured returns the projection of a Server read as unstructured content
// (from a dynamic informer), with ProjectServer's error when it is invalid; an object that
// does not convert to a Server at all gives a nil Server.
func ServerFromUnstructured(content map[string]any) (*Server, error) {
	var o ServerObject
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(content, &o); err != nil {
		return nil, fmt.Errorf("not a Server: %w", err)
	}
	return ProjectServer(&o)
}

// Selects reports whether s selects port of pod: the pod is in s's namespace and matches its
// selector, and the port is s's number or the number of the pod's container port (or init
// container port) of s's name.
func (s *Server) Selects(pod *Pod, port uint32) bool {
	if s == nil || pod == nil || s.Selector == nil || s.Namespace != pod.Namespace() || !s.Selector.Matches(labels.Set(pod.GetLabels())) {
		return false
	}
	switch s.Port.Type {
	case intstr.Int:
		return s.Port.IntVal >= 0 && uint32(s.Port.IntVal) == port
	case intstr.String:
		return hasNamedPort(pod, s.Port.StrVal, port)
	}
	return false
}

// ServerOpaque reports whether a Server of servers with proxyProtocol opaque selects port of
// pod (a Server of another namespace selects nothing), as Linkerd's destination decides.
func ServerOpaque(servers []*Server, pod *Pod, port uint32) bool {
	for _, s := range servers {
		if s.ProxyProtocol == ProxyProtocolOpaque && s.Selects(pod, port) {
			return true
		}
	}
	return false
}
