package injector

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	sjson "sigs.k8s.io/json"

	"github.com/meridian-mesh/meridian/internal/quote"
)

// MaxReviewBytes bounds an AdmissionReview body. The API server's own request limit is
// 3 MiB; a larger body is answered with 400 without being read further.
const MaxReviewBytes = 8 << 20

// namespaceLookupTimeout bounds the namespace GET of one review.
const namespaceLookupTimeout = 5 * time.Second

// Webhook is the mutating admission webhook: an http.Handler for admission.k8s.io/v1
// AdmissionReview requests about Pods. It is safe for concurrent use.
//
// A body that is not a valid AdmissionReview gets HTTP 400 with the reason. Every valid
// review gets HTTP 200 and allowed: true; a pod that is skipped or cannot be handled is
// allowed unmodified, with the reason in response.result.message. An invalid annotation
// never skips a pod: it is ignored (see Config.Resolve) and reported in response.warnings
// (which kubectl prints), in a warn log and in the metrics.
type Webhook struct {
	cfg     Config
	ns      NamespaceLookup
	metrics *Metrics
	log     *zap.Logger
	// anchors, once set (SetTrustAnchors), replaces cfg.TrustAnchorsPEM: the bundle the
	// trust-roots ConfigMap holds now.
	anchors atomic.Pointer[string]
}

// SetTrustAnchors makes pem the trust anchors of the proxies injected from now on ("" until
// there are some: pods are then refused, not given proxies that cannot start).
func (wh *Webhook) SetTrustAnchors(pem string) { wh.anchors.Store(&pem) }

// config is the configuration a review injects with: cfg with the current trust anchors.
func (wh *Webhook) config() *Config {
	cfg := wh.cfg
	if a := wh.anchors.Load(); a != nil {
		cfg.TrustAnchorsPEM = *a
	}
	return &cfg
}

// NewWebhook returns a webhook injecting with cfg, reading namespaces through ns and
// counting into metrics (which may be nil). log may be nil.
func NewWebhook(cfg Config, ns NamespaceLookup, metrics *Metrics, log *zap.Logger) (*Webhook, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if ns == nil {
		return nil, errors.New("injector: nil NamespaceLookup")
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &Webhook{cfg: cfg, ns: ns, metrics: metrics, log: log}, nil
}

// ServeHTTP implements http.Handler.
func (wh *Webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) { serveReview(w, r, wh.Review) }

// serveReview answers the AdmissionReview POSTed in r with answer's response to its request:
// 405 for another method, 400 (saying why) for a body that is not a review with a request.
func serveReview(w http.ResponseWriter, r *http.Request, answer func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "admission reviews are POSTed", http.StatusMethodNotAllowed)
		return
	}
	review, err := DecodeReview(http.MaxBytesReader(w, r.Body, MaxReviewBytes))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	out := admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: answer(r.Context(), review.Request)}
	body, err := json.Marshal(&out)
	if err != nil { // cannot happen for these types; answer precisely anyway
		http.Error(w, "encode AdmissionReview: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// DecodeReview reads and checks an admission.k8s.io/v1 AdmissionReview carrying a request.
// The error says what is wrong, for an HTTP 400.
func DecodeReview(r io.Reader) (*admissionv1.AdmissionReview, error) {
	body, err := io.ReadAll(r)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, fmt.Errorf("AdmissionReview body exceeds %d bytes", tooBig.Limit)
		}
		return nil, fmt.Errorf("read AdmissionReview: %w", err)
	}
	if len(body) == 0 {
		return nil, errors.New("empty body: want an admission.k8s.io/v1 AdmissionReview")
	}
	var review admissionv1.AdmissionReview
	if err := decodeJSON(body, &review); err != nil {
		return nil, fmt.Errorf("decode AdmissionReview: %s", quote.Message(err.Error())) // a number's error quotes it whole
	}
	if review.APIVersion != "admission.k8s.io/v1" || review.Kind != "AdmissionReview" {
		return nil, fmt.Errorf("want apiVersion admission.k8s.io/v1 and kind AdmissionReview, got %s %s", quote.String(review.APIVersion), quote.String(review.Kind))
	}
	if review.Request == nil {
		return nil, errors.New("AdmissionReview has no request")
	}
	if review.Request.UID == "" {
		return nil, errors.New("AdmissionReview request has no uid")
	}
	return &review, nil
}

// Review answers one admission request. Anything it cannot handle is allowed unmodified with
// the reason, except a pod whose namespace cannot be read: the namespace may ask for the
// proxy, so the pod is refused (as Linkerd's injector does) unless its own annotation
// disables injection. Its controller retries; admitting it would start it without its proxy,
// silently.
func (wh *Webhook) Review(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	skip := func(reason, detail string) *admissionv1.AdmissionResponse {
		msg := "proxy not injected: " + reason
		if detail != "" {
			msg += ": " + detail
		}
		resp.Result = &metav1.Status{Status: metav1.StatusSuccess, Message: msg}
		return resp
	}
	if req.Kind.Group != "" || req.Kind.Kind != "Pod" {
		return skip(ReasonUnsupportedResource, fmt.Sprintf("kind %s/%s", quote.String(req.Kind.Group), quote.String(req.Kind.Kind)))
	}
	if req.Operation != admissionv1.Create {
		return skip(ReasonUnsupportedOperation, quote.String(string(req.Operation)))
	}
	var pod corev1.Pod
	if err := decodeJSON(req.Object.Raw, &pod); err != nil {
		wh.metrics.observe(labelValues(Owner{}, req.Namespace, Decision{Reason: ReasonInvalidPod}, Meta{}, nil, nil), nil)
		return skip(ReasonInvalidPod, quote.String(err.Error()))
	}
	if len(pod.Spec.Containers) == 0 {
		wh.metrics.observe(labelValues(OwnerOf(&pod.ObjectMeta), req.Namespace, Decision{Reason: ReasonInvalidPod}, Meta{}, pod.Annotations, nil), nil)
		return skip(ReasonInvalidPod, "pod has no containers")
	}
	namespace := req.Namespace
	if namespace == "" {
		namespace = pod.Namespace
	}
	var ns Meta
	var err error
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		// The API server sends only names of namespaces that exist; a hand-made review is
		// answered as a failed lookup, and its name is shown cut short from here on.
		err = fmt.Errorf("not a namespace name: %s", errs[0])
		namespace = quote.MessagePrefix(namespace, 64)
	} else {
		lctx, cancel := context.WithTimeout(ctx, namespaceLookupTimeout)
		ns, err = wh.ns.Namespace(lctx, namespace)
		cancel()
	}
	if err != nil {
		d := Decision{Reason: ReasonNamespaceLookupFailure}
		wh.metrics.observe(labelValues(OwnerOf(&pod.ObjectMeta), namespace, d, Meta{}, pod.Annotations, nil), nil)
		if pod.Annotations[AnnotationInject] == InjectDisabled {
			wh.log.Warn("namespace lookup failed; pod admitted without proxy, as its annotation asks", zap.String("namespace", namespace), zap.Error(err))
			return skip(ReasonNamespaceLookupFailure, err.Error())
		}
		wh.log.Warn("namespace lookup failed; pod refused", zap.String("namespace", namespace), zap.Error(err))
		resp.Allowed = false
		resp.Result = &metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusServiceUnavailable, Reason: metav1.StatusReasonServiceUnavailable,
			Message: fmt.Sprintf("proxy injector: cannot read namespace %s to decide whether the pod gets its proxy, so it is refused rather than started without one (its controller retries): %s",
				quote.String(namespace), quote.String(err.Error())),
		}
		return resp
	}

	cfg := wh.config()
	out := cfg.Review(ns, namespace, &pod.ObjectMeta, &pod.Spec, false)
	if out.Decision.Inject && strings.TrimSpace(cfg.TrustAnchorsPEM) == "" {
		// A proxy without trust anchors cannot start: refused, as the namespace lookup's
		// failure is, until the trust-roots ConfigMap is there.
		wh.log.Warn("no trust anchors for the proxy; pod refused", zap.String("namespace", namespace))
		resp.Allowed = false
		resp.Result = &metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusServiceUnavailable, Reason: metav1.StatusReasonServiceUnavailable,
			Message: "proxy injector: no trust anchors to give the proxy yet (the linkerd-identity-trust-roots ConfigMap's ca-bundle.crt), so the pod is refused rather than started with a proxy that cannot start (its controller retries)",
		}
		return resp
	}
	wh.metrics.observe(labelValues(out.Owner, namespace, out.Decision, ns, pod.Annotations, out.Warnings), out.Warnings)
	fields := []zap.Field{
		// The owner comes from the pod as the API server sent it, before validation: cut
		// short, as the UID of a hand-made review.
		zap.String("namespace", namespace), zap.String("owner_kind", quote.MessagePrefix(out.Owner.Kind, 63)),
		zap.String("owner", quote.MessagePrefix(out.Owner.Name, 253)), zap.String("uid", quote.MessagePrefix(string(req.UID), 64)),
	}
	if len(out.Warnings) > 0 {
		resp.Warnings = Strings(out.Warnings)
		wh.log.Warn("ignored invalid annotations", append(fields, zap.Bool("injected", out.Decision.Inject), zap.Strings("warnings", resp.Warnings))...)
	}
	if len(out.Notes) > 0 {
		resp.Warnings = append(resp.Warnings, out.Notes...)
		wh.log.Warn("injected pod with traffic the proxy does not see", append(fields, zap.Strings("notes", out.Notes))...)
	}
	if !out.Decision.Inject {
		wh.log.Info("skipped", append(fields, zap.String("reason", out.Decision.Reason), zap.String("detail", out.Detail))...)
		return skip(out.Decision.Reason, out.Detail)
	}
	ops := out.Mutation.Patch("", &pod.ObjectMeta, &pod.Spec)
	if !hasMetadata(req.Object.Raw) {
		// The API server always sends metadata; a hand-made review may not.
		ops = append([]PatchOp{{Op: "add", Path: "/metadata", Value: map[string]any{}}}, ops...)
	}
	patch, err := MarshalPatch(ops)
	if err != nil {
		return skip(ReasonInvalidPod, "encode patch: "+err.Error())
	}
	pt := admissionv1.PatchTypeJSONPatch
	resp.PatchType = &pt
	resp.Patch = patch
	wh.log.Info("injected", append(fields, zap.String("annotation_at", out.Decision.AnnotationAt))...)
	return resp
}

// decodeJSON decodes as the API server does: keys match field names exactly (encoding/json
// alone would read "annotatioNs" as annotations, and the patch computed from that would
// not apply to the object the API server holds, which has no such field), and numbers
// keep their integer form.
func decodeJSON(data []byte, v any) error {
	return sjson.UnmarshalCaseSensitivePreserveInts(data, v)
}

// hasMetadata reports whether a pod's JSON has a metadata object for the patch to add to.
func hasMetadata(raw []byte) bool {
	var shape struct {
		Metadata json.RawMessage `json:"metadata"`
	}
	if err := decodeJSON(raw, &shape); err != nil {
		return false
	}
	m := bytes.TrimSpace(shape.Metadata)
	return len(m) > 0 && m[0] == '{'
}
