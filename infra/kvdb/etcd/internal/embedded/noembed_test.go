//go:build contiv_noembed

package embedded

import (
	"errors"
	"testing"
)

// Built without the server (make static, the image's agent), Start
// refuses with the error that says how to configure an etcd instead, and
// the loopback check still works (etcd.conf is validated the same way).
func TestStartWithoutTheEmbeddedServer(t *testing.T) {
	srv, err := Start(Config{Dir: t.TempDir(), ClientURL: "http://127.0.0.1:0", PeerURL: "http://127.0.0.1:0"})
	if srv != nil || !errors.Is(err, ErrNotBuiltIn) {
		t.Fatalf("Start = %v, %v; want nil, ErrNotBuiltIn", srv, err)
	}
	if err := CheckLoopback("http://10.0.0.1:2379"); err == nil {
		t.Fatal("CheckLoopback accepted a non-loopback URL")
	}
}
