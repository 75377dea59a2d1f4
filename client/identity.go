package client

import "context"

type identityKey struct{}

// WithIdentity marks requests made with ctx as made on behalf of id: a connection
// opened under one identity is never re-used for another (TLS client
// certificates, connection-based auth such as NTLM). The empty id is the
// anonymous identity. It does not block and is safe for concurrent use.
func WithIdentity(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the identity set by WithIdentity, or "" (anonymous).
func IdentityFrom(ctx context.Context) string {
	id, _ := ctx.Value(identityKey{}).(string)
	return id
}
