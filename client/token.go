package client

import (
	"context"

	docketv1 "github.com/dockethq/docket/proto/docketv1"
)

// bearerToken is the per-RPC credentials of WithToken.
type bearerToken string

func (t bearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{docketv1.MetadataAuthorization: "Bearer " + string(t)}, nil
}

// RequireTransportSecurity is false in this round: TLS for the client
// comes with the TLS work, and until then a token must travel over the
// insecure transport (see WithToken).
func (bearerToken) RequireTransportSecurity() bool { return false }
