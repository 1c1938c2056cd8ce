package agent_test

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra"
	"github.com/contiv-ipam/agent/infra/agent"
)

// recorder collects lifecycle calls of all test plugins in order.
type recorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.calls = append(r.calls, s)
	r.mu.Unlock()
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

// testPlugin records its lifecycle calls and fails where told.
type testPlugin struct {
	name     string
	rec      *recorder
	failIn   string        // "init", "after", "close"
	block    chan struct{} // Init waits on it when set
	Deps     []infra.Plugin
	DepField infra.Plugin
}

func (p *testPlugin) String() string { return p.name }

func (p *testPlugin) Init() error {
	p.rec.add("init " + p.name)
	if p.block != nil {
		<-p.block
	}
	return p.fail("init")
}

func (p *testPlugin) AfterInit() error {
	p.rec.add("after " + p.name)
	return p.fail("after")
}

func (p *testPlugin) Close() error {
	p.rec.add("close " + p.name)
	return p.fail("close")
}

func (p *testPlugin) fail(phase string) error {
	if p.failIn == phase {
		return errors.New(p.name + " failed in " + phase)
	}
	return nil
}

func quiet() agent.Option { return agent.Logger(slog.New(slog.NewTextHandler(io.Discard, nil))) }

func newAgent(t *testing.T, opts ...agent.Option) *agent.Agent {
	t.Helper()
	base := []agent.Option{quiet(), agent.Args(nil), agent.QuitSignals(),
		agent.FlagSet(flag.NewFlagSet(t.Name(), flag.ContinueOnError))}
	a, err := agent.NewAgent(append(base, opts...)...)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return a
}

func TestLifecycleOrder(t *testing.T) {
	g := NewWithT(t)
	rec := &recorder{}
	a := newAgent(t, agent.Plugins(
		&testPlugin{name: "a", rec: rec}, &testPlugin{name: "b", rec: rec}, &testPlugin{name: "c", rec: rec}))
	g.Expect(a.Start()).To(Succeed())
	g.Expect(a.Stop()).To(Succeed())
	g.Expect(rec.list()).To(Equal([]string{
		"init a", "init b", "init c", "after a", "after b", "after c", "close c", "close b", "close a"}))
	g.Expect(a.After()).To(BeClosed())
}

func TestFailureUnwinds(t *testing.T) {
	cases := []struct {
		name   string
		failer string
		phase  string
		want   []string
	}{
		{"init fails in the middle", "b", "init", []string{
			"init a", "init b", "close b", "close a"}},
		{"init fails first", "a", "init", []string{"init a", "close a"}},
		{"after-init fails", "b", "after", []string{
			"init a", "init b", "init c", "after a", "after b", "close c", "close b", "close a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			rec := &recorder{}
			var ps []infra.Plugin
			for _, n := range []string{"a", "b", "c"} {
				p := &testPlugin{name: n, rec: rec}
				if n == tc.failer {
					p.failIn = tc.phase
				}
				ps = append(ps, p)
			}
			a := newAgent(t, agent.Plugins(ps...))
			err := a.Start()
			g.Expect(err).To(MatchError(ContainSubstring("plugin " + tc.failer)))
			g.Expect(rec.list()).To(Equal(tc.want))
			g.Expect(a.Start()).To(MatchError(err.Error()), "Start runs once")
			g.Expect(a.Stop()).To(Succeed(), "nothing left to stop")
		})
	}
}

func TestCloseErrorsAreJoinedAndAllClosed(t *testing.T) {
	g := NewWithT(t)
	rec := &recorder{}
	a := newAgent(t, agent.Plugins(
		&testPlugin{name: "a", rec: rec, failIn: "close"},
		&testPlugin{name: "b", rec: rec},
		&testPlugin{name: "c", rec: rec, failIn: "close"}))
	g.Expect(a.Start()).To(Succeed())
	err := a.Stop()
	g.Expect(err).To(MatchError(ContainSubstring("a failed in close")))
	g.Expect(err).To(MatchError(ContainSubstring("c failed in close")))
	g.Expect(rec.list()[6:]).To(Equal([]string{"close c", "close b", "close a"}))
	g.Expect(a.Stop()).To(MatchError(err.Error()), "Stop runs once")
	g.Expect(a.Wait()).To(MatchError(err.Error()))
}

func TestStopAndWaitBeforeStart(t *testing.T) {
	g := NewWithT(t)
	a := newAgent(t, agent.Plugins(&testPlugin{name: "a", rec: &recorder{}}))
	g.Expect(a.Stop()).To(MatchError(agent.ErrNotStarted))
	g.Expect(a.Wait()).To(MatchError(agent.ErrNotStarted))
}

func TestStartTimeoutClosesFinishedPlugins(t *testing.T) {
	g := NewWithT(t)
	rec := &recorder{}
	block := make(chan struct{})
	defer close(block)
	a := newAgent(t, agent.StartTimeout(50*time.Millisecond), agent.Plugins(
		&testPlugin{name: "a", rec: rec}, &testPlugin{name: "slow", rec: rec, block: block},
		&testPlugin{name: "c", rec: rec}))
	err := a.Start()
	g.Expect(err).To(MatchError(ContainSubstring("start timeout")))
	g.Expect(err).To(MatchError(ContainSubstring("plugin slow runs Init")))
	g.Expect(rec.list()).To(Equal([]string{"init a", "init slow", "close a"}))
}

func TestStopTimeout(t *testing.T) {
	g := NewWithT(t)
	block := make(chan struct{})
	defer close(block)
	p := &blockingClose{testPlugin: testPlugin{name: "stuck", rec: &recorder{}}, block: block}
	a := newAgent(t, agent.StopTimeout(50*time.Millisecond), agent.Plugins(p))
	g.Expect(a.Start()).To(Succeed())
	g.Expect(a.Stop()).To(MatchError(ContainSubstring("stop timeout 50ms exceeded while plugin stuck runs Close")))
}

type blockingClose struct {
	testPlugin
	block chan struct{}
}

func (p *blockingClose) Close() error {
	<-p.block
	return nil
}

func TestRunQuits(t *testing.T) {
	cases := []struct {
		name string
		opts func(trigger func()) []agent.Option
	}{
		{"quit channel", func(trigger func()) []agent.Option {
			ch := make(chan struct{})
			go func() { trigger(); close(ch) }()
			return []agent.Option{agent.QuitOnClose(ch)}
		}},
		{"context", func(trigger func()) []agent.Option {
			ctx, cancel := context.WithCancel(context.Background())
			go func() { trigger(); cancel() }()
			return []agent.Option{agent.Context(ctx)}
		}},
		{"signal", func(trigger func()) []agent.Option {
			go func() { trigger(); _ = syscall.Kill(syscall.Getpid(), syscall.SIGUSR1) }()
			return []agent.Option{agent.QuitSignals(syscall.SIGUSR1)}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			rec := &recorder{}
			started := make(chan struct{})
			p := &notifyPlugin{testPlugin: testPlugin{name: "p", rec: rec}, started: started}
			a := newAgent(t, append(tc.opts(func() { <-started }), agent.Plugins(p))...)
			g.Expect(a.Run()).To(Succeed())
			g.Expect(rec.list()).To(Equal([]string{"init p", "after p", "close p"}))
		})
	}
}

type notifyPlugin struct {
	testPlugin
	started chan struct{}
}

func (p *notifyPlugin) AfterInit() error {
	err := p.testPlugin.AfterInit()
	close(p.started)
	return err
}

func TestRunReturnsStartError(t *testing.T) {
	g := NewWithT(t)
	rec := &recorder{}
	a := newAgent(t, agent.Plugins(&testPlugin{name: "bad", rec: rec, failIn: "init"}))
	g.Expect(a.Run()).To(MatchError(ContainSubstring("plugin bad: init: bad failed in init")))
	g.Expect(a.After()).To(BeClosed())
}

func TestExternalStopEndsRun(t *testing.T) {
	g := NewWithT(t)
	rec := &recorder{}
	started := make(chan struct{})
	p := &notifyPlugin{testPlugin: testPlugin{name: "p", rec: rec}, started: started}
	a := newAgent(t, agent.Plugins(p))
	go func() { <-started; _ = a.Stop() }()
	g.Expect(a.Run()).To(Succeed())
	g.Expect(rec.list()).To(ContainElement("close p"))
}
