package rest

import (
	"io"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/logging"
)

func TestConfigReachesServer(t *testing.T) {
	g := NewWithT(t)
	c := Config{
		Endpoint:          "127.0.0.1:0",
		ReadTimeout:       11 * time.Second,
		ReadHeaderTimeout: 12 * time.Second,
		WriteTimeout:      13 * time.Second,
		IdleTimeout:       14 * time.Second,
		MaxHeaderBytes:    4096,
		ShutdownTimeout:   time.Second,
	}
	p := NewPlugin(UseConf(c), UseDeps(func(d *Deps) {
		d.LogRegistry = logging.NewRegistry(logging.WithOutput(io.Discard))
	}))
	g.Expect(p.Init()).To(Succeed())
	g.Expect(p.AfterInit()).To(Succeed())
	defer func() { g.Expect(p.Close()).To(Succeed()) }()

	p.mu.Lock()
	srv := p.server
	p.mu.Unlock()
	g.Expect(srv.ReadTimeout).To(Equal(11 * time.Second))
	g.Expect(srv.ReadHeaderTimeout).To(Equal(12 * time.Second))
	g.Expect(srv.WriteTimeout).To(Equal(13 * time.Second))
	g.Expect(srv.IdleTimeout).To(Equal(14 * time.Second))
	g.Expect(srv.MaxHeaderBytes).To(Equal(4096))
	g.Expect(p.TLS()).To(BeFalse())
}
