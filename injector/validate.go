package injector

import (
	"context"
	"net/http"

	"go.uber.org/zap"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meridian-mesh/meridian/translator"
)

// ServiceProfilePath is the path of the ServiceProfile validating webhook on the webhook
// server (the chart's ValidatingWebhookConfiguration names it); every other path is the
// proxy injector.
const ServiceProfilePath = "/validate/serviceprofile"

// ProfileValidator is the validating admission webhook of linkerd.io ServiceProfiles, as
// Linkerd's sp-validator: an http.Handler for admission.k8s.io/v1 AdmissionReview requests.
// A profile created or updated is refused (allowed: false, code 400, the reason as the
// message) when translator.ValidateServiceProfile refuses it: it does not decode strictly,
// or its routes, conditions or retry budget are invalid. Anything else (another kind, a
// deletion) is allowed. A body that is not a valid AdmissionReview gets HTTP 400. It is safe
// for concurrent use.
type ProfileValidator struct {
	log *zap.Logger
}

// NewProfileValidator returns the validator; log may be nil.
func NewProfileValidator(log *zap.Logger) *ProfileValidator {
	if log == nil {
		log = zap.NewNop()
	}
	return &ProfileValidator{log: log}
}

// ServeHTTP implements http.Handler.
func (v *ProfileValidator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	serveReview(w, r, func(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return v.Review(req)
	})
}

// Review answers one admission request.
func (v *ProfileValidator) Review(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	if req.Kind.Group != translator.ServiceProfileGroup || req.Kind.Kind != "ServiceProfile" ||
		(req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		return resp
	}
	if err := translator.ValidateServiceProfile(req.Object.Raw); err != nil {
		v.log.Info("ServiceProfile refused", zap.String("profile", req.Namespace+"/"+req.Name), zap.Error(err))
		resp.Allowed = false
		resp.Result = &metav1.Status{Status: metav1.StatusFailure, Message: err.Error(), Code: http.StatusBadRequest, Reason: metav1.StatusReasonBadRequest}
	}
	return resp
}

// Handler routes the webhook server's requests: ServiceProfilePath to the validator, every
// other path to the proxy injector.
func Handler(injector http.Handler, profiles *ProfileValidator) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(ServiceProfilePath, profiles)
	mux.Handle("/", injector)
	return mux
}
