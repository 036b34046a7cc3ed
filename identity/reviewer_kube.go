package identity

import (
	"context"
	"fmt"
	"slices"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	authnclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
)

// KubeReviewer reviews tokens with the Kubernetes TokenReview API
// (authentication.k8s.io/v1) for audience Audience.
type KubeReviewer struct {
	Client   authnclient.TokenReviewsGetter
	Audience string
}

var _ TokenReviewer = (*KubeReviewer)(nil)

// NewKubeReviewer returns a TokenReview reviewer using client.
func NewKubeReviewer(client kubernetes.Interface) *KubeReviewer {
	return &KubeReviewer{Client: client.AuthenticationV1(), Audience: Audience}
}

// Review implements TokenReviewer. A token authenticated for other audiences only is
// reported with an Error, like the API server does for audience mismatches.
func (k *KubeReviewer) Review(ctx context.Context, token []byte) (Review, error) {
	tr := &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: string(token), Audiences: []string{k.Audience}}}
	rvw, err := k.Client.TokenReviews().Create(ctx, tr, metav1.CreateOptions{})
	if err != nil {
		return Review{}, fmt.Errorf("create TokenReview: %w", err)
	}
	st := rvw.Status
	if st.Error != "" {
		return Review{Error: st.Error}, nil
	}
	if !st.Authenticated {
		return Review{}, nil
	}
	// An API server without audience support answers with no audiences; one with it
	// must echo ours.
	if len(st.Audiences) > 0 && !slices.Contains(st.Audiences, k.Audience) {
		return Review{Error: fmt.Sprintf("token is authenticated for audiences %q, not %q", st.Audiences, k.Audience)}, nil
	}
	return Review{Authenticated: true, Username: st.User.Username}, nil
}

// CheckTokenReviewAccess asks the API server whether this process may create
// TokenReviews, so that a missing RBAC rule stops the server at start with a clear
// message rather than failing every request.
func CheckTokenReviewAccess(ctx context.Context, client kubernetes.Interface) error {
	r := &authzv1.SelfSubjectAccessReview{Spec: authzv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authzv1.ResourceAttributes{
			Group: "authentication.k8s.io", Version: "v1", Resource: "tokenreviews", Verb: "create",
		},
	}}
	rvw, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, r, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("check TokenReview access: %w", err)
	}
	if !rvw.Status.Allowed {
		return fmt.Errorf("this service account may not create authentication.k8s.io/v1 tokenreviews (%s); grant it in the identity ClusterRole", rvw.Status.Reason)
	}
	return nil
}
