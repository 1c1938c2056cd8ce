package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"

	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
)

// External IPAM (plugin mode with an ipam section of another type):
// contiv-cni runs that plugin itself with the same stdin, found on
// CNI_PATH, and hands its addresses to the agent as ipam_type / ipam_data
// (see ipamData). Every delegate call runs under the config's timeout.

// addWithDelegate runs the delegate's ADD, then the agent's Add with its
// address. When the agent call fails, the delegate's DEL runs so that the
// delegate's lease does not leak, and the agent's error is returned.
func (inv *invocation) addWithDelegate(ctx context.Context, req *cni.CNIRequest) (*cni.CNIReply, error) {
	data, err := inv.delegateAdd(ctx)
	if err != nil {
		return nil, err
	}
	req.IpamType, req.IpamData = inv.conf.DelegateType, data
	reply, err := call(ctx, inv.agent, "Add", inv.agent.client.Add, req)
	if err != nil {
		if delErr := inv.delegateDel(ctx); delErr != nil {
			inv.log.Error("releasing the delegate's lease after the agent failed",
				"delegate", inv.conf.DelegateType, "error", delErr)
		}
		return nil, err
	}
	return reply, nil
}

// delegateAdd runs the delegate's ADD and returns the ipam_data of its
// result (ipamData). A result without an address is released again and is
// an error.
func (inv *invocation) delegateAdd(ctx context.Context) (string, error) {
	addCtx, cancel := context.WithTimeout(ctx, inv.conf.Timeout)
	defer cancel()
	raw, err := invoke.DelegateAdd(addCtx, inv.conf.DelegateType, inv.args.StdinData, nil)
	if err != nil {
		return "", inv.delegateError("ADD", err)
	}
	data, err := ipamData(raw)
	if err != nil {
		if delErr := inv.delegateDel(ctx); delErr != nil {
			inv.log.Error("releasing the delegate's unusable lease", "error", delErr)
		}
		return "", types.NewError(uint(cni.CodeInternal),
			fmt.Sprintf("ipam.type %q: %v", inv.conf.DelegateType, err), "")
	}
	return data, nil
}

// ipamData is the ipam_data of a delegate's result (any version): its
// IPConfigs as CNI 1.0 JSON, without the interface index, in the
// delegate's order. One address is one object, as contiv-cni always sent
// it ({"address":"10.1.5.7/24","gateway":"10.1.5.1"}); several (a
// dual-stack delegate: one per family) are an array of them. The agent
// tells the two forms apart by the first character.
func ipamData(raw types.Result) (string, error) {
	res, err := types100.NewResultFromResult(raw)
	if err != nil {
		return "", fmt.Errorf("unusable result: %w", err)
	}
	if len(res.IPs) == 0 {
		return "", fmt.Errorf("the result has no address")
	}
	ips := make([]*types100.IPConfig, 0, len(res.IPs))
	for _, ip := range res.IPs {
		c := *ip
		c.Interface = nil
		ips = append(ips, &c)
	}
	var data []byte
	if len(ips) == 1 {
		data, err = json.Marshal(ips[0])
	} else {
		data, err = json.Marshal(ips)
	}
	if err != nil {
		return "", fmt.Errorf("encoding its addresses: %w", err)
	}
	return string(data), nil
}

// delegateDel runs the delegate's DEL with the same stdin.
func (inv *invocation) delegateDel(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, inv.conf.Timeout)
	defer cancel()
	if err := invoke.DelegateDel(ctx, inv.conf.DelegateType, inv.args.StdinData, nil); err != nil {
		return inv.delegateError("DEL", err)
	}
	return nil
}

// delegateCheck runs the delegate's CHECK with the same stdin.
func (inv *invocation) delegateCheck(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, inv.conf.Timeout)
	defer cancel()
	if err := invoke.DelegateCheck(ctx, inv.conf.DelegateType, inv.args.StdinData, nil); err != nil {
		return inv.delegateError("CHECK", err)
	}
	return nil
}

// delegateError keeps the delegate's CNI error code and says which
// delegate and command failed; a delegate that cannot be found or run is
// code 100 naming ipam.type and CNI_PATH.
func (inv *invocation) delegateError(cmd string, err error) *types.Error {
	var cniErr *types.Error
	if errors.As(err, &cniErr) && cniErr.Code != 0 {
		return types.NewError(cniErr.Code,
			fmt.Sprintf("delegated IPAM ipam.type %q %s: %s", inv.conf.DelegateType, cmd, cniErr.Msg), cniErr.Details)
	}
	return types.NewError(uint(cni.CodeInternal),
		fmt.Sprintf("delegated IPAM ipam.type %q %s (CNI_PATH %q): %v", inv.conf.DelegateType, cmd, inv.args.Path, err), "")
}
