package bridge

import (
	"context"
	"strconv"

	"github.com/mrtr-go/mrtr/reqstate"
)

type callerKey struct{}

// WithCaller returns ctx carrying the principal of the request being
// served: the proxy sets it, so sessions are never shared between callers.
func WithCaller(ctx context.Context, p reqstate.Principal) context.Context {
	return context.WithValue(ctx, callerKey{}, p)
}

func callerOf(ctx context.Context) reqstate.Principal {
	p, _ := ctx.Value(callerKey{}).(reqstate.Principal)
	return p
}

type authKey struct{}

// withAuthorization returns ctx carrying the Authorization header of the
// request being served, which the proxy leaves on it only when it
// forwards it (proxy.Options.ForwardAuthorization).
func withAuthorization(ctx context.Context, v string) context.Context {
	if v == "" {
		return ctx
	}
	return context.WithValue(ctx, authKey{}, v)
}

func authorizationOf(ctx context.Context) string {
	v, _ := ctx.Value(authKey{}).(string)
	return v
}

// key is a principal as a map key; issuer and subject are
// length-prefixed, so no two principals share one.
func key(p reqstate.Principal) string {
	if p.Anonymous() {
		return ""
	}
	return strconv.Itoa(len(p.Issuer)) + ":" + p.Issuer + p.Subject
}
