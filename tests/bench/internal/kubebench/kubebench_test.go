package kubebench

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

func TestCreateAllCallsEveryNameAndJoinsTheErrors(t *testing.T) {
	g := NewWithT(t)
	var calls atomic.Int32
	err := CreateAll(context.Background(), []string{"a", "b", "c", "d"}, 3, func(_ context.Context, name string) error {
		calls.Add(1)
		if name == "b" || name == "d" {
			return fmt.Errorf("create %s: boom", name)
		}
		return nil
	})
	g.Expect(calls.Load()).To(Equal(int32(4)))
	g.Expect(err).To(MatchError(ContainSubstring("create b: boom")))
	g.Expect(err).To(MatchError(ContainSubstring("create d: boom")))
}

// node is a Node that holds a pod CIDR when cidr is true.
func node(name string, cidr bool) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if cidr {
		n.Spec.PodCIDRs = []string{"10.0.0.0/24"}
	}
	return n
}

// A Follower counts what the list found and what the watch brings, and
// lists again when the watch ends (as the API server drops a watcher that
// falls behind), then goes on from the new watch.
func TestAFollowerListsAgainWhenTheWatchEnds(t *testing.T) {
	g := NewWithT(t)
	watches := []*watch.FakeWatcher{watch.NewFake(), watch.NewFake()}
	lists := 0
	f := &Follower{
		What: "Nodes with CIDRs",
		List: func(context.Context) ([]string, int, watch.Interface, error) {
			lists++
			if lists == 1 {
				return []string{"a"}, 3, watches[0], nil
			}
			return []string{"a", "b"}, 3, watches[1], nil // b got its CIDR while nobody watched
		},
		Reached: func(obj runtime.Object) (string, bool, bool) {
			n, ok := obj.(*corev1.Node)
			if !ok {
				return "", false, false
			}
			return n.Name, len(n.Spec.PodCIDRs) > 0, true
		},
	}
	listed, err := f.Relist(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(listed).To(Equal(3))
	g.Expect(f.Len()).To(Equal(1))
	go func() {
		watches[0].Modify(node("b", false)) // no CIDR yet: not counted
		watches[0].Stop()                   // the server ends the watch
		watches[1].Modify(node("c", true))
	}()
	g.Expect(f.Wait(context.Background(), 3, 10*time.Second)).To(Succeed())
	g.Expect(f.Relists()).To(Equal(2))
	f.Stop()
}

func TestAFollowerSaysHowManyReachedTheStateWhenTimeIsUp(t *testing.T) {
	g := NewWithT(t)
	f := &Follower{
		What: "claims Ready",
		List: func(context.Context) ([]string, int, watch.Interface, error) {
			return []string{"a"}, 2, watch.NewFake(), nil
		},
		Reached: func(runtime.Object) (string, bool, bool) { return "", false, false },
	}
	_, err := f.Relist(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	err = f.Wait(context.Background(), 2, 50*time.Millisecond)
	g.Expect(err).To(MatchError("1 of 2 claims Ready after 50ms"))
	g.Expect(errors.Unwrap(err)).To(BeNil())
}
