package ksr

import (
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/contiv-ipam/agent/infra/config"
)

// KubeconfigFlag is the flag (env KUBECONFIG) naming the kubeconfig file.
const KubeconfigFlag = "kubeconfig"

// kubeConfig resolves how to reach the API server, first match wins:
// -kubeconfig, env KUBECONFIG, the kubeconfig key of ksr.conf, and, inside
// a pod, the in-cluster config (the service account). It returns the
// config and where it came from.
func (p *Plugin) kubeConfig(cfg Config) (*rest.Config, string, error) {
	path, origin := config.LookupOrigin(p.flags, KubeconfigFlag, "", p.env)
	if path == "" && cfg.Kubeconfig != "" {
		path, origin = cfg.Kubeconfig, "ksr.conf kubeconfig"
	}
	if path != "" {
		c, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, "", fmt.Errorf("kubeconfig %q (from %s): %w", path, origin, err)
		}
		return c, fmt.Sprintf("%s (%s)", path, origin), nil
	}
	if _, inPod := p.env("KUBERNETES_SERVICE_HOST"); !inPod {
		return nil, "", fmt.Errorf("no kubeconfig: give -%s, set %s or the kubeconfig key of ksr.conf, "+
			"or run inside a pod (KUBERNETES_SERVICE_HOST is unset)", KubeconfigFlag, config.EnvName(KubeconfigFlag))
	}
	c, err := rest.InClusterConfig()
	if err != nil {
		return nil, "", fmt.Errorf("in-cluster config: %w", err)
	}
	return c, "in-cluster service account", nil
}

// hostIdentity names this replica: host name and process ID.
func hostIdentity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return fmt.Sprintf("%s/%d", host, os.Getpid())
}
