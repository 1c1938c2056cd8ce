package cluster

import (
	"context"
	"os"
	"path/filepath"

	"github.com/contiv-ipam/agent/plugins/controller"
	"github.com/contiv-ipam/agent/plugins/ipam"
	"github.com/contiv-ipam/agent/tests/testenv"
)

// AgentOptions shape one contiv-agent.
type AgentOptions struct {
	// Node is the node name (MICROSERVICE_LABEL); required, one per agent.
	Node string
	// Conf replaces or adds config files by name ("contiv.conf": "...");
	// the others are testenv.AgentConfig's, with etcd.conf naming the
	// cluster's etcd.
	Conf map[string]string
	// Env adds environment variables.
	Env []string
	// Unready: return once the agent has started ("agent ready" logged)
	// without waiting for /readiness 200, for an agent that is expected to
	// wait (external IPAM without its node's pod CIDR).
	Unready bool
}

// Agent is a contiv-agent process on the cluster's etcd.
type Agent struct {
	*Proc
	// Node is the node name it serves.
	Node string
	// REST is the base URL of its REST server, "http://127.0.0.1:port".
	REST string
	// Socket is its CNI gRPC socket.
	Socket string
}

// startAgent writes the config directory dir (testenv.AgentConfig with
// etcd.conf naming endpoint, then o.Conf) and runs contiv-agent on it
// until its /readiness answers 200 (unless o.Unready).
func startAgent(ctx context.Context, bin, dir, endpoint string, o AgentOptions) (*Agent, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	a := &Agent{Node: o.Node, Socket: filepath.Join(dir, "cni.sock")}
	files, err := testenv.AgentConfig(dir, a.Socket)
	if err != nil {
		return nil, err
	}
	files["etcd.conf"] = etcdConf(endpoint)
	for name, content := range o.Conf {
		files[name] = content
	}
	if err := testenv.WriteConfig(dir, files); err != nil {
		return nil, err
	}
	env := append(testenv.AgentEnv(dir, o.Node), o.Env...)
	p, err := startProc(procSpec{name: "agent-" + o.Node, bin: bin, dir: dir, env: env, ready: readyLine("agent ready")})
	if err != nil {
		return nil, err
	}
	a.Proc = p
	if a.REST, err = p.waitReady(ctx, startTimeout); err == nil && !o.Unready {
		err = waitReadiness(ctx, p, a.REST)
	}
	if err != nil {
		return nil, joinKill(err, p)
	}
	return a, nil
}

// IPAM reads GET /contiv/v1/ipam (node ID, pod subnet, ...).
func (a *Agent) IPAM(ctx context.Context) (ipam.NodeIPAMInfo, error) {
	var info ipam.NodeIPAMInfo
	err := GetJSON(ctx, a.REST+ipam.IPAMPath, &info)
	return info, err
}

// Allocations reads GET /contiv/v1/ipam/allocations.
func (a *Agent) Allocations(ctx context.Context) ([]testenv.Allocation, error) {
	var out struct {
		Pods []testenv.Allocation `json:"Pods"`
	}
	err := GetJSON(ctx, a.REST+ipam.AllocationsPath, &out)
	return out.Pods, err
}

// Resync asks the agent to resync the Kubernetes state from etcd (POST
// /controller/resync); the resync runs after the answer.
func (a *Agent) Resync(ctx context.Context) error { return Post(ctx, a.REST+controller.ResyncPath) }
