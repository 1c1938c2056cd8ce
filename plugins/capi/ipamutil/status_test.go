//lint:file-ignore SA1019 Cluster API's v1beta1 packages and the deprecated v1beta1 conditions are what a management cluster at v1beta1 serves

package ipamutil

import (
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
)

// The Ready condition has a deprecated v1beta1 twin (status.conditions
// of the claim read at v1beta1): True without a reason, False with the
// reason, message and severity; its lastTransitionTime moves only with
// the status.
func TestV1Beta1ReadyCondition(t *testing.T) {
	g := NewWithT(t)
	claim := &ipamv1.IPAddressClaim{}
	v1beta1Ready := func() clusterv1.Condition {
		g.Expect(claim.Status.Deprecated).NotTo(BeNil())
		g.Expect(claim.Status.Deprecated.V1Beta1).NotTo(BeNil())
		conds := claim.Status.Deprecated.V1Beta1.Conditions
		g.Expect(conds).To(HaveLen(1))
		return conds[0]
	}
	setNotReady(claim, fmt.Errorf("pool p: %w", ErrPoolExhausted))
	c := v1beta1Ready()
	g.Expect(c.Type).To(Equal(clusterv1.ReadyV1Beta1Condition))
	g.Expect(c.Status).To(Equal(corev1.ConditionFalse))
	g.Expect(c.Reason).To(Equal(ipamv1.PoolExhaustedV1Beta1Reason))
	g.Expect(c.Severity).To(Equal(clusterv1.ConditionSeverityWarning))
	g.Expect(c.Message).To(ContainSubstring("pool p"))
	g.Expect(c.LastTransitionTime.IsZero()).To(BeFalse())

	// Same status, other reason: the time stays.
	old := metav1.NewTime(c.LastTransitionTime.Add(-3600e9))
	claim.Status.Deprecated.V1Beta1.Conditions[0].LastTransitionTime = old
	setNotReady(claim, errors.New("boom"))
	c = v1beta1Ready()
	g.Expect(c.Reason).To(Equal(ipamv1.AllocationFailedV1Beta1Reason))
	g.Expect(c.Severity).To(Equal(clusterv1.ConditionSeverityError))
	g.Expect(c.LastTransitionTime).To(Equal(old))

	setAddressReady(claim, &ipamv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: ipamv1.IPAddressSpec{Address: "10.0.0.1"}})
	c = v1beta1Ready()
	g.Expect(c.Status).To(Equal(corev1.ConditionTrue))
	g.Expect(c.Reason).To(BeEmpty())
	g.Expect(c.Severity).To(BeEmpty())
	g.Expect(c.Message).To(BeEmpty())
	g.Expect(c.LastTransitionTime).NotTo(Equal(old))
	g.Expect(claim.Status.Conditions).To(ConsistOf(HaveField("Status", metav1.ConditionTrue)))
}
