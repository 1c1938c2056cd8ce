package podmanager

import (
	"context"
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/engine/ipalloc"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
)

func TestErrorCode(t *testing.T) {
	cases := []struct {
		name string
		err  error
		code uint32
	}{
		{"nil", nil, 0},
		{"try again", fmt.Errorf("ipam: %w", ErrTryAgain), cni.CodeTryAgainLater},
		{"shutting down", errShuttingDown, cni.CodeTryAgainLater},
		{"request timeout", fmt.Errorf("the agent did not answer within 10s: %w", context.DeadlineExceeded), cni.CodeTryAgainLater},
		{"loop closed", fmt.Errorf("push Add Pod: %w", api.ErrClosedController), cni.CodeTryAgainLater},
		{"queue full", fmt.Errorf("push Add Pod: %w", api.ErrEventQueueFull), cni.CodeTryAgainLater},
		{"bad request", fmt.Errorf("%w: network_name is empty", ErrBadRequest), cni.CodeBadRequest},
		{"pool exhausted", fmt.Errorf("10.1.1.0/24: %w", ipalloc.ErrPoolExhausted), cni.CodePoolExhausted},
		{"check failed", fmt.Errorf("%w: no allocation for n/c/eth0", errCheckFailed), cni.CodeCheckFailed},
		{"not available wins over try again", fmt.Errorf("%w: %w", errNotAvailable, ErrTryAgain), cni.CodeNotAvailable},
		{"anything else", errors.New("bolt: disk full"), cni.CodeInternal},
		{"cancelled", context.Canceled, cni.CodeInternal},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(errorCode(tc.err)).To(Equal(tc.code))
			if tc.err != nil {
				r := errorReply(tc.err)
				g.Expect(r.GetResult()).To(Equal(cni.CNIReply_ERROR))
				g.Expect(r.GetErrorCode()).To(Equal(tc.code))
				g.Expect(r.GetError()).To(Equal(tc.err.Error()))
			}
		})
	}
}
