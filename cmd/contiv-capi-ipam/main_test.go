package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/contiv-ipam/agent/infra/logging/logtest"
	"github.com/contiv-ipam/agent/plugins/capi/api/v1alpha1"
	"github.com/contiv-ipam/agent/plugins/capi/pool"
	"github.com/contiv-ipam/agent/tests/kubeenv"
)

func noEnv(string) (string, bool) { return "", false }

// syncBuffer is a buffer the provider writes while the test reads.
type syncBuffer = logtest.Buffer

// Bad command lines exit 2 naming the flag; -version and -h exit 0.
func TestCommandLine(t *testing.T) {
	cases := []struct {
		name string
		args []string
		code int
		out  string
	}{
		{"version", []string{"-version"}, 0, "contiv-capi-ipam dev"},
		{"help", []string{"-h"}, 0, "-max-concurrent-reconciles"},
		{"unknown flag", []string{"-nope"}, 2, "flag provided but not defined: -nope"},
		{"no workers", []string{"-max-concurrent-reconciles", "0"}, 2, "-max-concurrent-reconciles 0"},
		{"no rate", []string{"-kube-api-qps", "0"}, 2, "-kube-api-qps 0, -kube-api-burst 100: want both above 0"},
		{"no burst", []string{"-kube-api-burst", "0"}, 2, "-kube-api-qps 50, -kube-api-burst 0: want both above 0"},
		{"no version check", []string{"-api-version-check-interval", "0"}, 2, "-api-version-check-interval 0s: want above 0"},
		{"help names the version check", []string{"-h"}, 0, "-api-version-check-interval"},
		{"stray argument", []string{"serve"}, 2, `unexpected arguments ["serve"]`},
		{"missing kubeconfig", []string{"-kubeconfig", "/nonexistent/kc"}, 1, `kubeconfig \"/nonexistent/kc\"`},
		{"not in a pod", nil, 1, "not in a pod"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var out bytes.Buffer
			code := run(context.Background(), tc.args, &out, &out, noEnv)
			g.Expect(code).To(Equal(tc.code), out.String())
			g.Expect(out.String()).To(ContainSubstring(tc.out))
		})
	}
}

// The client of the manager gets the rate of the flags, on a copy of the
// kubeconfig's config.
func TestTheClientRateComesFromTheFlags(t *testing.T) {
	g := NewWithT(t)
	o, err := parse([]string{"-kube-api-qps", "75.5", "-kube-api-burst", "150"}, io.Discard, noEnv)
	g.Expect(err).NotTo(HaveOccurred())
	base := &rest.Config{Host: "https://127.0.0.1:6443"}
	cfg := withRate(base, o)
	g.Expect(cfg.QPS).To(BeNumerically("==", 75.5))
	g.Expect(cfg.Burst).To(Equal(150))
	g.Expect(cfg.Host).To(Equal(base.Host))
	g.Expect(base.QPS).To(BeZero(), "the caller's config is not changed")
	def, err := parse(nil, io.Discard, noEnv)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(withRate(base, def).QPS).To(BeNumerically("==", 50), "the default is 50/s, not client-go's 5")
}

// The binary's run serves a claim on a real API server (leader election
// on), and stops cleanly with exit code 0 when its context ends.
func TestServesAClaim(t *testing.T) {
	g := NewWithT(t)
	kube := kubeenv.StartT(t, kubeenv.WithCRDs("plugins/capi/api/crd", "plugins/capi/api/crd/capi"))
	scheme, err := pool.NewScheme()
	g.Expect(err).NotTo(HaveOccurred())
	c, err := client.New(kube.Config, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	done := make(chan int, 1)
	args := []string{"-kubeconfig", kube.Kubeconfig, "-leader-election-namespace", "default",
		"-metrics-bind-address", "127.0.0.1:0", "-health-probe-bind-address", "127.0.0.1:0"}
	go func() { done <- run(ctx, args, &out, &out, noEnv) }()

	p := &v1alpha1.ContivIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p"},
		Spec: v1alpha1.ContivIPPoolSpec{Addresses: []string{"192.168.100.10-192.168.100.20"}, Prefix: 24, Gateway: "192.168.100.1"}}
	g.Expect(c.Create(ctx, p)).To(Succeed())
	claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "m1"},
		Spec: ipamv1.IPAddressClaimSpec{PoolRef: ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: pool.KindPool, Name: "p"}}}
	g.Expect(c.Create(ctx, claim)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(claim), claim)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(claim.Status.Conditions, ipamv1.IPAddressClaimReadyCondition)).To(BeTrue())
		var ip ipamv1.IPAddress
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "m1"}, &ip)).To(Succeed())
		g.Expect(ip.Spec.Address).To(Equal("192.168.100.10"))
		g.Expect(ip.Spec.Gateway).To(Equal("192.168.100.1"))
	}).WithTimeout(30*time.Second).Should(Succeed(), out.String)
	cancel()
	g.Eventually(done).WithTimeout(40*time.Second).Should(Receive(Equal(0)), out.String)
	g.Expect(out.String()).To(ContainSubstring("contiv-capi-ipam starting"))
}

// The provider needs nothing beyond k8s/capi-ipam/rbac.yaml: run as its
// service account (impersonated), it serves a claim, releases it, and lets
// its pool go.
func TestTheManifestRBACIsEnough(t *testing.T) {
	g := NewWithT(t)
	kube := kubeenv.StartT(t, kubeenv.WithCRDs("plugins/capi/api/crd", "plugins/capi/api/crd/capi"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, err := kube.KubectlCmd(ctx, "create", "namespace", "capi-system").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	out, err = kube.KubectlCmd(ctx, "apply", "-f", filepath.Join(kubeenv.RepoRoot(), "k8s", "capi-ipam", "rbac.yaml")).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))

	cfg := rest.CopyConfig(kube.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:capi-system:contiv-capi-ipam"}
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	o := options{metrics: "0", health: "0", leaderElect: true, leaderNamespace: "capi-system", workers: 2,
		skipNameCheck: true} // TestServesAClaim ran a manager in this process
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	})
	done := make(chan error, 1)
	go func() { done <- serveOn(ctx, cfg, "impersonated", o, log) }()

	scheme, err := pool.NewScheme()
	g.Expect(err).NotTo(HaveOccurred())
	c, err := client.New(kube.Config, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	p := &v1alpha1.ContivIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p"},
		Spec: v1alpha1.ContivIPPoolSpec{Addresses: []string{"192.168.7.0/29"}, Prefix: 29}}
	g.Expect(c.Create(ctx, p)).To(Succeed())
	claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "m1"},
		Spec: ipamv1.IPAddressClaimSpec{PoolRef: ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: pool.KindPool, Name: "p"}}}
	g.Expect(c.Create(ctx, claim)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(claim), claim)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(claim.Status.Conditions, ipamv1.IPAddressClaimReadyCondition)).To(BeTrue())
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		g.Expect(p.Status.Addresses).NotTo(BeNil())
		g.Expect(p.Status.Addresses.Used).To(BeEquivalentTo(1))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(c.Delete(ctx, claim)).To(Succeed())
	g.Expect(c.Delete(ctx, p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(claim), claim))).To(BeTrue(), "claim %+v", claim)
		g.Expect(apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(p), p))).To(BeTrue(), "pool %+v", p.ObjectMeta)
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(logs.String()).NotTo(ContainSubstring("forbidden"))
	cancel()
	g.Eventually(done).WithTimeout(40 * time.Second).Should(Receive(BeNil()))
}
