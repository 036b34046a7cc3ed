package identity

import "context"

// MaxTokenSize bounds the token a request may carry (Kubernetes tokens are ~1 KiB).
const MaxTokenSize = 16 << 10

// Review is the outcome of reviewing a token, shaped like Kubernetes' TokenReviewStatus.
//
//   - Error set: the reviewer examined the token and found it bad (malformed, expired,
//     wrong audience). Certify answers Unauthenticated.
//   - Authenticated false, no Error: the reviewer does not recognise the token (signed by
//     someone else). Certify answers Unauthenticated.
//   - Authenticated true: Username is the authenticated user, system:serviceaccount:NS:SA
//     for a ServiceAccount.
type Review struct {
	Authenticated bool
	Username      string
	Error         string
}

// TokenReviewer checks a ServiceAccount token for audience Audience.
//
// Review is called concurrently from gRPC handler goroutines and must be safe for that. It
// returns an error only when the review could not be carried out (API server unreachable,
// context ended); a bad token is reported in the Review, never as an error. The token
// must not be retained after Review returns.
type TokenReviewer interface {
	Review(ctx context.Context, token []byte) (Review, error)
}
