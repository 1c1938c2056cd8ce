package manifests

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// checkAccess: contiv-ksr's service account may get, list and watch what
// its informers watch, and do what node IPAM does (patch nodes and their
// status, write events); the agent runs on every node whatever its taints.
func checkAccess(_ *testing.T, b *bundle) []error {
	role, binding, dep := b.role(), b.binding(), b.ksr()
	if role == nil || binding == nil || dep == nil {
		return []error{fmt.Errorf("the render lacks ClusterRole, ClusterRoleBinding or Deployment %s", ksrName)}
	}
	var errs []error
	for _, res := range []string{"nodes", "pods", "namespaces"} {
		for _, verb := range []string{"get", "list", "watch"} {
			if !allows(role.Rules, res, verb) {
				errs = append(errs, fmt.Errorf("ClusterRole %s rules do not allow %s on %s (core group)", ksrName, verb, res))
			}
		}
	}
	for _, rv := range [][2]string{{"nodes", "patch"}, {"nodes/status", "patch"}, {"events", "create"}, {"events", "patch"}} {
		if !allows(role.Rules, rv[0], rv[1]) {
			errs = append(errs, fmt.Errorf("ClusterRole %s rules do not allow %s on %s (core group), which node IPAM needs", ksrName, rv[1], rv[0]))
		}
	}
	sa := dep.Spec.Template.Spec.ServiceAccountName
	if binding.RoleRef.Name != role.Name || !slices.ContainsFunc(binding.Subjects, func(s rbacv1.Subject) bool {
		return s.Kind == "ServiceAccount" && s.Name == sa && s.Namespace == namespace
	}) {
		errs = append(errs, fmt.Errorf("ClusterRoleBinding %s does not bind ClusterRole %s to ServiceAccount %s/%s (Deployment %s spec.template.spec.serviceAccountName)",
			binding.Name, role.Name, namespace, sa, ksrName))
	}
	if ds := b.agent(); ds == nil || !tolerateAll(ds.Spec.Template.Spec.Tolerations) {
		errs = append(errs, fmt.Errorf("DaemonSet %s spec.template.spec.tolerations: want {operator: Exists} so that every node gets the CNI", agentName))
	}
	return errs
}

func tolerateAll(ts []corev1.Toleration) bool {
	return slices.ContainsFunc(ts, func(x corev1.Toleration) bool {
		return x.Key == "" && x.Operator == corev1.TolerationOpExists && x.Effect == ""
	})
}

// allows reports whether a rule of the core group grants verb on res.
func allows(rules []rbacv1.PolicyRule, res, verb string) bool {
	return slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.APIGroups, "") && (slices.Contains(r.Resources, res) || slices.Contains(r.Resources, "*")) &&
			(slices.Contains(r.Verbs, verb) || slices.Contains(r.Verbs, "*"))
	})
}
