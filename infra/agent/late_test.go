package agent_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/agent"
)

// gatedPlugin blocks in Init or AfterInit (gateIn) until gate is closed,
// records when that call returns, and signals every Close on closed.
type gatedPlugin struct {
	testPlugin
	gateIn string // "init" or "after"
	gate   chan struct{}
	closed chan struct{} // one value per Close call
}

func newGated(name, gateIn string, rec *recorder) *gatedPlugin {
	return &gatedPlugin{testPlugin: testPlugin{name: name, rec: rec}, gateIn: gateIn,
		gate: make(chan struct{}), closed: make(chan struct{}, 4)}
}

func (p *gatedPlugin) Init() error {
	p.rec.add("init " + p.name)
	if p.gateIn == "init" {
		<-p.gate
		p.rec.add("init returned " + p.name)
	}
	return p.fail("init")
}

func (p *gatedPlugin) AfterInit() error {
	p.rec.add("after " + p.name)
	if p.gateIn == "after" {
		<-p.gate
		p.rec.add("after returned " + p.name)
	}
	return p.fail("after")
}

func (p *gatedPlugin) Close() error {
	err := p.testPlugin.Close()
	p.closed <- struct{}{}
	return err
}

// A plugin whose Init or AfterInit returns after the start timeout is
// closed once, after that call returned; the others are closed at the
// timeout; Start's error names it and Stop waits for its Close.
func TestLateCallIsClosedOnce(t *testing.T) {
	cases := []struct {
		name      string
		gateIn    string
		failIn    string
		startErr  string
		atTimeout []string // calls when Start returns
		stopErr   string   // "" = Stop succeeds
	}{
		{name: "late Init", gateIn: "init", startErr: "plugin slow (Init) is closed when that call returns",
			atTimeout: []string{"init a", "init slow", "close a"}},
		{name: "late failing Init", gateIn: "init", failIn: "init",
			startErr:  "plugin slow (Init) is closed when that call returns",
			atTimeout: []string{"init a", "init slow", "close a"},
			stopErr:   "plugin slow returned from Init after the start timeout and was closed: plugin slow: init: slow failed in init"},
		{name: "late AfterInit", gateIn: "after", startErr: "plugin slow (AfterInit) is closed when that call returns",
			atTimeout: []string{"init a", "init slow", "init c", "after a", "after slow", "close c", "close a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			rec := &recorder{}
			slow := newGated("slow", tc.gateIn, rec)
			slow.failIn = tc.failIn
			a := newAgent(t, agent.StartTimeout(50*time.Millisecond), agent.StopTimeout(time.Minute), agent.Plugins(
				&testPlugin{name: "a", rec: rec}, slow, &testPlugin{name: "c", rec: rec}))
			err := a.Start()
			g.Expect(err).To(MatchError(ContainSubstring("start timeout 50ms exceeded while plugin slow runs")))
			g.Expect(err).To(MatchError(ContainSubstring(tc.startErr)))
			g.Expect(rec.list()).To(Equal(tc.atTimeout), "slow is not closed while its call runs")

			close(slow.gate)
			stopErr := a.Stop() // waits for slow's Close
			if tc.stopErr == "" {
				g.Expect(stopErr).NotTo(HaveOccurred())
			} else {
				g.Expect(stopErr).To(MatchError(ContainSubstring(tc.stopErr)))
			}
			calls := rec.list()
			g.Expect(calls[len(tc.atTimeout):]).To(Equal([]string{
				map[string]string{"init": "init returned slow", "after": "after returned slow"}[tc.gateIn],
				"close slow"}))
			g.Expect(slow.closed).To(HaveLen(1), "closed exactly once")
			g.Expect(a.Stop() == stopErr).To(BeTrue(), "Stop runs once: the same result")
			g.Expect(slow.closed).To(HaveLen(1))
		})
	}
}

// Stop does not wait past its timeout for a late plugin; the plugin is
// still closed once when its call returns.
func TestStopTimeoutWhileACallIsLate(t *testing.T) {
	g := NewWithT(t)
	rec := &recorder{}
	slow := newGated("slow", "init", rec)
	a := newAgent(t, agent.StartTimeout(50*time.Millisecond), agent.StopTimeout(50*time.Millisecond),
		agent.Plugins(slow))
	g.Expect(a.Start()).To(MatchError(ContainSubstring("start timeout")))
	err := a.Stop()
	g.Expect(err).To(MatchError(ContainSubstring("stop timeout 50ms exceeded: plugin slow (Init) still runs since the start timeout")))
	close(slow.gate)
	g.Eventually(slow.closed, 10*time.Second).Should(Receive())
	g.Expect(rec.list()).To(Equal([]string{"init slow", "init returned slow", "close slow"}))
	g.Expect(a.Wait()).To(MatchError(err.Error()))
}

// Run returns the start error joined with Stop's, which reports the late
// Init's failure.
func TestRunReportsALateFailingInit(t *testing.T) {
	g := NewWithT(t)
	rec := &recorder{}
	slow := newGated("slow", "init", rec)
	slow.failIn = "init"
	a := newAgent(t, agent.StartTimeout(50*time.Millisecond), agent.StopTimeout(time.Minute),
		agent.Plugins(&testPlugin{name: "a", rec: rec}, slow))
	ran := make(chan error, 1)
	go func() { ran <- a.Run() }()
	// "close a" means the start timeout has passed.
	g.Eventually(rec.list, 10*time.Second).Should(Equal([]string{"init a", "init slow", "close a"}))
	close(slow.gate)
	var err error
	g.Eventually(ran, 10*time.Second).Should(Receive(&err))
	g.Expect(err).To(MatchError(ContainSubstring("start timeout 50ms exceeded while plugin slow runs Init")))
	g.Expect(err).To(MatchError(ContainSubstring("plugin slow returned from Init after the start timeout and was closed: plugin slow: init: slow failed in init")))
	g.Expect(slow.closed).To(HaveLen(1))
}
