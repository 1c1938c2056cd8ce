package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/contiv-ipam/agent/infra/command"
)

func envOf(kv map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
}

func TestRunVersionPrintsBuildInfoAndExitsZero(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"-version"}, &out, &errOut, envOf(nil))
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errOut.String())
	}
	if !strings.HasPrefix(out.String(), "contiv-agent "+version) {
		t.Errorf("stdout %q, want the version", out.String())
	}
}

func TestRunHelpListsPluginFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"-h"}, &out, &errOut, envOf(nil)); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, f := range []string{"-config-dir", "-http-config", "-http-port", "-etcd-config",
		"-bolt-config", "-microservice-label", "-version", "-accept-node-id-change", "-nodesync-presence-ttl", "-bolt-recover"} {
		if !strings.Contains(errOut.String(), f) {
			t.Errorf("usage lacks %s:\n%s", f, errOut.String())
		}
	}
}

func TestRunRejectsBadInputNamingIt(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"unknown flag", []string{"-no-such-flag"}, nil, "no-such-flag"},
		{"start timeout", nil, map[string]string{command.EnvStartTimeout: "soon"}, `START_TIMEOUT="soon"`},
		{"negative stop timeout", nil, map[string]string{command.EnvStopTimeout: "-1s"}, `STOP_TIMEOUT="-1s"`},
		{"log format", nil, map[string]string{command.EnvLogFormat: "xml"}, `LOG_FORMAT="xml"`},
		{"log level", nil, map[string]string{"INITIAL_LOGLVL": "loud"}, `INITIAL_LOGLVL="loud"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(c.args, &out, &errOut, envOf(c.env))
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			if !strings.Contains(errOut.String(), c.want) {
				t.Errorf("stderr %q lacks %q", errOut.String(), c.want)
			}
		})
	}
}
