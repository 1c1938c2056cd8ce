//go:build node

package node

import (
	"errors"
	"os"
	"time"
)

// controllers are the controllers kube-controller-manager runs: what a
// Deployment, a ReplicaSet, a DaemonSet or a StatefulSet (k8s/'s
// contiv-etcd) needs (and the garbage
// collector that deletes a Deployment's pods), namespace deletion, and
// the node lifecycle controller, which lifts the not-ready taint the API
// server puts on a new Node (TaintNodesByCondition) once kubelet reports
// it Ready: without it the scheduler never places a pod. The service
// account token controller is left out (it needs the signing key), and
// so is every cloud, IPAM and volume controller.
const controllers = "deployment,replicaset,daemonset,statefulset,garbagecollector,namespace,nodelifecycle"

// controlPlane is kube-scheduler and kube-controller-manager on the API
// server's admin kubeconfig, without leader election and without a
// serving port (--secure-port=0): nothing listens.
type controlPlane struct {
	scheduler, controllerManager *proc
}

// startControlPlane starts both in dir.
func startControlPlane(bins Bins, dir, kubeconfig string) (*controlPlane, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	c := &controlPlane{}
	var err error
	c.scheduler, err = startProc("kube-scheduler", dir, bins.Scheduler(),
		[]string{"--kubeconfig=" + kubeconfig, "--leader-elect=false", "--secure-port=0"}, nil)
	if err != nil {
		return nil, err
	}
	c.controllerManager, err = startProc("kube-controller-manager", dir, bins.ControllerManager(),
		[]string{"--kubeconfig=" + kubeconfig, "--leader-elect=false", "--secure-port=0", "--controllers=" + controllers,
			"--use-service-account-credentials=false"}, nil)
	if err != nil {
		return nil, errors.Join(err, c.stop())
	}
	return c, nil
}

// stop stops both (SIGTERM, SIGKILL after 10 s).
func (c *controlPlane) stop() error {
	var errs []error
	for _, p := range []*proc{c.controllerManager, c.scheduler} {
		if p != nil {
			errs = append(errs, p.stop(10*time.Second))
		}
	}
	return errors.Join(errs...)
}

// procs are the running processes, for the report and the checks.
func (c *controlPlane) procs() []*proc {
	var out []*proc
	for _, p := range []*proc{c.scheduler, c.controllerManager} {
		if p != nil {
			out = append(out, p)
		}
	}
	return out
}
