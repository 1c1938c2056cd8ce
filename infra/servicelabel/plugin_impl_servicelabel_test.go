package servicelabel_test

import (
	"flag"
	"io"
	"os"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/logging"
	"github.com/contiv-ipam/agent/infra/servicelabel"
)

func quiet() servicelabel.Option {
	return servicelabel.UseDeps(func(d *servicelabel.Deps) {
		d.LogRegistry = logging.NewRegistry(logging.WithOutput(io.Discard))
	})
}

// withArgs builds a plugin whose flags were parsed from args.
func withArgs(t *testing.T, args []string, opts ...servicelabel.Option) *servicelabel.Plugin {
	t.Helper()
	p := servicelabel.NewPlugin(append([]servicelabel.Option{quiet()}, opts...)...)
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	p.RegisterFlags(fs)
	NewWithT(t).Expect(fs.Parse(args)).To(Succeed())
	return p
}

// Not parallel: sets MICROSERVICE_LABEL.
func TestLabelPrecedence(t *testing.T) {
	host, err := os.Hostname()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	cases := []struct {
		name string
		env  string // "" means unset
		args []string
		opts []servicelabel.Option
		want string
	}{
		{name: "default is the host name", want: host},
		{name: "env beats default", env: "node-env", want: "node-env"},
		{name: "flag beats env", env: "node-env", args: []string{"-microservice-label", "node-flag"}, want: "node-flag"},
		{name: "flag without env", args: []string{"-microservice-label=node-flag"}, want: "node-flag"},
		{name: "UseLabel beats flag and env", env: "node-env", args: []string{"-microservice-label", "node-flag"},
			opts: []servicelabel.Option{servicelabel.UseLabel("fixed")}, want: "fixed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			t.Setenv("MICROSERVICE_LABEL", tc.env) // empty counts as unset
			p := withArgs(t, tc.args, tc.opts...)
			g.Expect(p.Init()).To(Succeed())
			g.Expect(p.GetAgentLabel()).To(Equal(tc.want))
			g.Expect(p.GetAgentPrefix()).To(Equal("/vnf-agent/" + tc.want + "/"))
			g.Expect(p.Close()).To(Succeed())
		})
	}
}

func TestNoFlagSetFallsBackToEnv(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("MICROSERVICE_LABEL", "from-env")
	p := servicelabel.NewPlugin(quiet()) // RegisterFlags never called
	g.Expect(p.Init()).To(Succeed())
	g.Expect(p.GetAgentLabel()).To(Equal("from-env"))
}

func TestPrefixes(t *testing.T) {
	g := NewWithT(t)
	var api servicelabel.ReaderAPI = servicelabel.NewPlugin(quiet(), servicelabel.UseLabel("node1"))
	g.Expect(api.(*servicelabel.Plugin).Init()).To(Succeed())
	g.Expect(api.GetAgentLabel()).To(Equal("node1"))
	g.Expect(api.GetAgentPrefix()).To(Equal("/vnf-agent/node1/"))
	g.Expect(api.GetDifferentAgentPrefix("node2")).To(Equal("/vnf-agent/node2/"))
	g.Expect(api.GetAllAgentsPrefix()).To(Equal("/vnf-agent/"))
}

func TestInvalidLabels(t *testing.T) {
	cases := []struct {
		name, label, wantErr string
	}{
		{"empty", "", "empty agent label"},
		{"slash", "a/b", `"a/b"`},
		{"space", "a b", `"a b"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p := servicelabel.NewPlugin(quiet(), servicelabel.UseLabel(tc.label))
			err := p.Init()
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
			g.Expect(err).To(MatchError(ContainSubstring("UseLabel")), "the error says where the label came from")
		})
	}
}
