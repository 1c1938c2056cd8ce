//go:build contiv_noembed

package embedded

import "errors"

// ErrNotBuiltIn is what Start returns in a binary built with the tag
// contiv_noembed (the agent of the image, which always has an etcd
// cluster): it has no embedded server.
var ErrNotBuiltIn = errors.New("this contiv-agent is built without the embedded etcd server (build tag contiv_noembed, " +
	"as the image ships it): set endpoints in etcd.conf (or ETCD_ENDPOINTS)")

// Server is never started in this build.
type Server struct{}

// Start returns ErrNotBuiltIn.
func Start(Config) (*Server, error) { return nil, ErrNotBuiltIn }

// ClientURL is "".
func (*Server) ClientURL() string { return "" }

// PeerURL is "".
func (*Server) PeerURL() string { return "" }

// Endpoint is "".
func (*Server) Endpoint() string { return "" }

// Close does nothing.
func (*Server) Close() {}
