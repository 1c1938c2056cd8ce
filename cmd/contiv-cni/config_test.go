package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/gomega"
)

func TestParseConfig(t *testing.T) {
	cases := []struct {
		name     string
		conf     string
		mode     Mode
		target   string
		timeout  time.Duration
		delegate string
		logFile  string
	}{
		{
			name:   "plugin mode, unix path",
			conf:   `{"cniVersion":"1.0.0","name":"k8s","type":"contiv-cni","grpcServer":"/run/contiv/cni.sock"}`,
			mode:   ModePlugin,
			target: "unix:///run/contiv/cni.sock", timeout: 10 * time.Second,
		},
		{
			name:   "plugin mode, unix URL, timeout, log file",
			conf:   `{"cniVersion":"0.3.1","name":"k8s","type":"contiv-cni","grpcServer":"unix:///run/cni.sock","grpcTimeout":"2s","logFile":"/var/log/contiv-cni.log"}`,
			mode:   ModePlugin,
			target: "unix:///run/cni.sock", timeout: 2 * time.Second, logFile: "/var/log/contiv-cni.log",
		},
		{
			name:   "plugin mode, unix: with one slash",
			conf:   `{"name":"k8s","type":"contiv-cni","grpcServer":"unix:/run/cni.sock"}`,
			mode:   ModePlugin,
			target: "unix:///run/cni.sock", timeout: 10 * time.Second,
		},
		{
			name:   "plugin mode, host:port as in Contiv",
			conf:   `{"name":"k8s","type":"contiv-cni","grpcServer":"127.0.0.1:9111"}`,
			mode:   ModePlugin,
			target: "dns:///127.0.0.1:9111", timeout: 10 * time.Second,
		},
		{
			name:   "plugin mode, IPv6 host:port",
			conf:   `{"name":"k8s","type":"contiv-cni","grpcServer":"[::1]:9111"}`,
			mode:   ModePlugin,
			target: "dns:///[::1]:9111", timeout: 10 * time.Second,
		},
		{
			name:   "plugin mode, :port is loopback",
			conf:   `{"name":"k8s","type":"contiv-cni","grpcServer":":9111"}`,
			mode:   ModePlugin,
			target: "dns:///127.0.0.1:9111", timeout: 10 * time.Second,
		},
		{
			name:   "plugin mode with a delegate",
			conf:   `{"name":"k8s","type":"contiv-cni","grpcServer":"/s","ipam":{"type":"host-local","subnet":"usePodCidr"}}`,
			mode:   ModePlugin,
			target: "unix:///s", timeout: 10 * time.Second, delegate: "host-local",
		},
		{
			name:   "plugin mode, cnitool shape: ipam of our own type carries the keys",
			conf:   `{"name":"k8s","type":"contiv-cni","ipam":{"type":"contiv-cni","grpcServer":"/s","grpcTimeout":"1s"}}`,
			mode:   ModePlugin,
			target: "unix:///s", timeout: time.Second,
		},
		{
			name:   "plugin mode: the top level wins over the ipam section",
			conf:   `{"name":"k8s","type":"contiv-cni","grpcServer":"/top","ipam":{"type":"contiv-cni","grpcServer":"/ipam","grpcTimeout":"3s"}}`,
			mode:   ModePlugin,
			target: "unix:///top", timeout: 3 * time.Second,
		},
		{
			name:   "IPAM mode under ptp",
			conf:   `{"cniVersion":"1.1.0","name":"p","type":"ptp","ipMasq":true,"ipam":{"type":"contiv-cni","grpcServer":"/s","grpcTimeout":"500ms"}}`,
			mode:   ModeIPAM,
			target: "unix:///s", timeout: 500 * time.Millisecond,
		},
		{
			name:   "IPAM mode, grpcServer at the top level",
			conf:   `{"name":"b","type":"bridge","grpcServer":"/top","ipam":{"type":"contiv-cni"}}`,
			mode:   ModeIPAM,
			target: "unix:///top", timeout: 10 * time.Second,
		},
		{
			name:   "IPAM mode: the ipam section wins over the top level",
			conf:   `{"name":"b","type":"macvlan","grpcServer":"/top","grpcTimeout":"4s","ipam":{"type":"contiv-cni","grpcServer":"/ipam"}}`,
			mode:   ModeIPAM,
			target: "unix:///ipam", timeout: 4 * time.Second,
		},
		{
			name:   "IPAM mode under the name the binary was run as",
			conf:   `{"name":"b","type":"ipvlan","ipam":{"type":"my-cni","grpcServer":"/s"}}`,
			mode:   ModeIPAM,
			target: "unix:///s", timeout: 10 * time.Second,
		},
		{
			name:   "unknown top-level keys are allowed (runtimes add their own)",
			conf:   `{"name":"k8s","type":"contiv-cni","grpcServer":"/s","runtimeConfig":{"x":1},"args":{"cni":{}},"capabilities":{"ips":true}}`,
			mode:   ModePlugin,
			target: "unix:///s", timeout: 10 * time.Second,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			conf, err := ParseConfig([]byte(tc.conf), "my-cni")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(conf.Mode).To(Equal(tc.mode))
			g.Expect(conf.Target).To(Equal(tc.target))
			g.Expect(conf.Timeout).To(Equal(tc.timeout))
			g.Expect(conf.DelegateType).To(Equal(tc.delegate))
			g.Expect(conf.LogFile).To(Equal(tc.logFile))
		})
	}
}

func TestParseConfigErrors(t *testing.T) {
	cases := []struct {
		name string
		conf string
		want []string // substrings of the message: the field and the value
	}{
		{"not JSON", `{"name":`, []string{"(document)", "invalid JSON"}},
		{"not an object", `[1,2]`, []string{"(document)", "must be an object, not array"}},
		{"missing name", `{"type":"contiv-cni","grpcServer":"/s"}`, []string{"name", "missing"}},
		{"name not a string", `{"name":5,"type":"contiv-cni","grpcServer":"/s"}`, []string{"network config: name ", "must be a string, not number"}},
		{"missing grpcServer", `{"name":"n","type":"contiv-cni"}`, []string{"grpcServer", "missing"}},
		{"empty grpcServer", `{"name":"n","type":"contiv-cni","grpcServer":""}`, []string{"grpcServer", "missing"}},
		{"grpcServer not a string", `{"name":"n","type":"contiv-cni","grpcServer":true}`, []string{"grpcServer", "must be a string, not bool"}},
		{"relative unix path", `{"name":"n","type":"contiv-cni","grpcServer":"unix:run/cni.sock"}`, []string{"grpcServer", `"unix:run/cni.sock"`, "absolute"}},
		{"dot path", `{"name":"n","type":"contiv-cni","grpcServer":"./cni.sock"}`, []string{"grpcServer", `"./cni.sock"`}},
		{"no port", `{"name":"n","type":"contiv-cni","grpcServer":"localhost"}`, []string{"grpcServer", `"localhost"`}},
		{"bad port", `{"name":"n","type":"contiv-cni","grpcServer":"localhost:http"}`, []string{"grpcServer", `"localhost:http"`, "port"}},
		{"port 0", `{"name":"n","type":"contiv-cni","grpcServer":"localhost:0"}`, []string{"grpcServer", `"localhost:0"`}},
		{"port too big", `{"name":"n","type":"contiv-cni","grpcServer":"localhost:70000"}`, []string{"grpcServer", `"localhost:70000"`}},
		{"bad timeout", `{"name":"n","type":"contiv-cni","grpcServer":"/s","grpcTimeout":"10"}`, []string{"grpcTimeout", `"10"`, "duration"}},
		{"zero timeout", `{"name":"n","type":"contiv-cni","grpcServer":"/s","grpcTimeout":"0s"}`, []string{"grpcTimeout", `"0s"`, "positive"}},
		{"negative timeout", `{"name":"n","type":"contiv-cni","grpcServer":"/s","grpcTimeout":"-5s"}`, []string{"grpcTimeout", `"-5s"`, "positive"}},
		{"timeout a number", `{"name":"n","type":"contiv-cni","grpcServer":"/s","grpcTimeout":10}`, []string{"network config: grpcTimeout ", "must be a string, not number"}},
		{"ipam timeout bad", `{"name":"n","type":"ptp","ipam":{"type":"contiv-cni","grpcServer":"/s","grpcTimeout":"1x"}}`, []string{"grpcTimeout", `"1x"`}},
		{"ipam unknown key", `{"name":"n","type":"ptp","ipam":{"type":"contiv-cni","grpcServer":"/s","subnet":"10.0.0.0/8"}}`, []string{"ipam.subnet", "unknown key"}},
		{"ipam not an object", `{"name":"n","type":"contiv-cni","grpcServer":"/s","ipam":"host-local"}`, []string{"network config: ipam ", "must be an object, not string"}},
		{"ipam without type", `{"name":"n","type":"contiv-cni","grpcServer":"/s","ipam":{"subnet":"10.0.0.0/8"}}`, []string{"ipam.type", "missing"}},
		{"ipam type not a string", `{"name":"n","type":"contiv-cni","grpcServer":"/s","ipam":{"type":1}}`, []string{"ipam.type", "must be a string, not number"}},
		{"neither type is ours", `{"name":"n","type":"ptp","ipam":{"type":"host-local"}}`, []string{"type", `"ptp"`, `"host-local"`}},
		{"no type at all", `{"name":"n","grpcServer":"/s"}`, []string{"type", `""`}},
		{"bad valid-attachments", `{"name":"n","type":"contiv-cni","grpcServer":"/s","cni.dev/valid-attachments":{}}`, []string{"network config: cni.dev/valid-attachments ", "must be an array, not object"}},
		{"bad prevResult", `{"name":"n","type":"contiv-cni","grpcServer":"/s","prevResult":[]}`, []string{"network config: prevResult ", "must be an object, not array"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := ParseConfig([]byte(tc.conf), "my-cni")
			g.Expect(err).To(HaveOccurred())
			var cniErr *types.Error
			g.Expect(errors.As(err, &cniErr)).To(BeTrue())
			g.Expect(cniErr.Code).To(BeEquivalentTo(types.ErrInvalidNetworkConfig))
			g.Expect(cniErr.Msg).To(HavePrefix("network config: "))
			for _, w := range tc.want {
				g.Expect(cniErr.Msg).To(ContainSubstring(w))
			}
		})
	}
}

// FuzzParseConfig: whatever the bytes, ParseConfig never panics, and
// every error is a code 7 *types.Error whose message names a field.
func FuzzParseConfig(f *testing.F) {
	seeds := []string{
		`{"cniVersion":"1.0.0","name":"k8s","type":"contiv-cni","grpcServer":"/run/cni.sock"}`,
		`{"name":"p","type":"ptp","ipam":{"type":"contiv-cni","grpcServer":"unix:///s","grpcTimeout":"1s"}}`,
		`{"name":"k","type":"contiv-cni","grpcServer":"[::1]:9111","ipam":{"type":"host-local"}}`,
		`{"name":"k","type":"contiv-cni","grpcServer":"/s","prevResult":{"cniVersion":"1.0.0","ips":[]}}`,
		`{"name":"k","type":"contiv-cni","grpcServer":"/s","cni.dev/valid-attachments":[{"containerID":"a","ifname":"b"}]}`,
		`{"name":"k","type":"contiv-cni","grpcServer":"/s","grpcTimeout":"-1s"}`,
		`{"name":"k","type":"ptp","ipam":{"type":"contiv-cni","x":1}}`,
		`{"name":"k","type":"contiv-cni","grpcServer":"unix:\u0000"}`,
		`null`, `{}`, `[`, ``,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		conf, err := ParseConfig(data, PluginType)
		if err == nil {
			if conf.Target == "" || conf.Timeout <= 0 || conf.Name == "" {
				t.Fatalf("accepted %q with target %q, timeout %v, name %q", data, conf.Target, conf.Timeout, conf.Name)
			}
			return
		}
		var cniErr *types.Error
		if !errors.As(err, &cniErr) || cniErr.Code != types.ErrInvalidNetworkConfig {
			t.Fatalf("error for %q is not a code 7 *types.Error: %#v", data, err)
		}
		if !strings.HasPrefix(cniErr.Msg, "network config: ") || len(cniErr.Msg) <= len("network config: ") {
			t.Fatalf("error for %q names no field: %q", data, cniErr.Msg)
		}
	})
}
