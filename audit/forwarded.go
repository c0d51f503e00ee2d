package audit

import (
	"context"

	"github.com/mrtr-go/mrtr/internal/mcpwire"
)

type forwardedKey struct{}

// WithForwardedBy returns ctx marking a call that another replica
// forwarded here: node names that replica (its id among the replicas).
// The lines a Writer writes for the call carry it as forwarded_by. The
// caller vouches for node (mrtr proxy records only a replica its
// directory knows).
func WithForwardedBy(ctx context.Context, node string) context.Context {
	return context.WithValue(ctx, forwardedKey{}, node)
}

// forwardedBy is the node WithForwardedBy put in ctx, or "".
func forwardedBy(ctx context.Context) string {
	node, _ := ctx.Value(forwardedKey{}).(string)
	return mcpwire.Shown(node)
}
