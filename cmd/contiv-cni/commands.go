package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	cniversion "github.com/containernetworking/cni/pkg/version"

	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
)

// invocation is the state of one call: the parsed config, the agent
// connection and the logger. It lives for one command and is owned by it.
type invocation struct {
	command string
	args    *skel.CmdArgs
	conf    *Config
	agent   *agent
	log     *slog.Logger
	close   func()
}

// funcs are the skel callbacks: each runs one method of an invocation.
func funcs() skel.CNIFuncs {
	return skel.CNIFuncs{
		Add:    handler("ADD", (*invocation).add),
		Del:    handler("DEL", (*invocation).del),
		Check:  handler("CHECK", (*invocation).check),
		GC:     handler("GC", (*invocation).gc),
		Status: handler("STATUS", (*invocation).status),
	}
}

// handler wraps one command: begin, run, end (which logs the failure,
// closes what begin opened and makes the error a CNI error).
func handler(command string, do func(*invocation, context.Context) error) func(*skel.CmdArgs) error {
	return func(args *skel.CmdArgs) error {
		inv, err := begin(command, args)
		if err != nil {
			return err
		}
		return inv.end(do(inv, context.Background()))
	}
}

// selfType is the type this binary answers to besides PluginType: the
// name it was run as (a runtime runs CNI_PATH/<type>).
func selfType() string {
	if len(os.Args) == 0 {
		return PluginType
	}
	return filepath.Base(os.Args[0])
}

// begin parses the config, opens the log and prepares the agent
// connection; the caller ends with inv.end.
func begin(command string, args *skel.CmdArgs) (*invocation, error) {
	conf, err := ParseConfig(args.StdinData, selfType())
	if err != nil {
		return nil, err
	}
	log, closeLog := openLog(conf.LogFile)
	a, err := dialAgent(conf)
	if err != nil {
		closeLog()
		return nil, err
	}
	inv := &invocation{command: command, args: args, conf: conf, agent: a, log: log}
	inv.close = func() {
		if err := a.Close(); err != nil {
			log.Debug("closing the agent connection", "error", err)
		}
		closeLog()
	}
	log.Debug("call", "command", command, "container", args.ContainerID,
		"ifname", args.IfName, "netns", args.Netns, "network", conf.Name, "mode", conf.Mode.String(),
		"delegate", conf.DelegateType)
	return inv, nil
}

func (inv *invocation) end(err error) error {
	if err != nil {
		inv.log.Error("failed", "command", inv.command, "container", inv.args.ContainerID, "error", err)
	}
	inv.close()
	return asCNIError(err)
}

// request is the CNIRequest of an ADD, DEL or CHECK.
func (inv *invocation) request() *cni.CNIRequest {
	return &cni.CNIRequest{
		Version:          inv.conf.CNIVersion,
		ContainerId:      inv.args.ContainerID,
		NetworkNamespace: inv.args.Netns,
		InterfaceName:    inv.args.IfName,
		ExtraNwConfig:    string(inv.args.StdinData),
		ExtraArguments:   inv.args.Args,
		NetworkName:      inv.conf.Name,
	}
}

// add asks the agent for the container's addresses (after running the
// delegate, if any), confirms the reply's reservation (if it has one) and
// prints the result in the config's version. The result is built and
// converted before the confirmation and printed only after it: a result
// on stdout means addresses that no longer expire. Whatever fails after
// the agent's Add (the result, the confirmation, the printing) rolls the
// ADD back.
func (inv *invocation) add(ctx context.Context) error {
	if inv.conf.Mode == ModePlugin && inv.conf.NetConf.RawPrevResult != nil {
		return confError("prevResult", "(set)",
			"contiv-cni is a main plugin and cannot be chained after another plugin")
	}
	req := inv.request()
	req.Confirms = true // contiv-cni confirms a reservation of the reply
	var reply *cni.CNIReply
	var err error
	if inv.conf.DelegateType != "" {
		reply, err = inv.addWithDelegate(ctx, req)
	} else {
		reply, err = callUntil(ctx, inv.agent, "Add", inv.agent.client.Add, req)
	}
	if err != nil {
		return err
	}
	res, err := toResult(reply, inv.conf.Mode, inv.args)
	var out []byte
	if err == nil {
		out, err = formatResult(res, inv.conf.CNIVersion)
	}
	if err == nil && reply.GetReservation() != "" {
		err = inv.confirm(ctx, reply.GetReservation())
	}
	if err == nil {
		_, err = os.Stdout.Write(out)
	}
	if err != nil {
		inv.rollback(ctx)
		return err
	}
	inv.log.Info("added", "container", inv.args.ContainerID, "ips", len(res.IPs),
		"reservation", reply.GetReservation())
	return nil
}

// confirm confirms the reservation of the agent's Add reply for the
// call's key. An agent error keeps its code and message (102: the
// reservation expired or was replaced); an unreachable agent is code 11.
func (inv *invocation) confirm(ctx context.Context, reservation string) error {
	req := &cni.ConfirmRequest{
		Version:       inv.conf.CNIVersion,
		ContainerId:   inv.args.ContainerID,
		InterfaceName: inv.args.IfName,
		NetworkName:   inv.conf.Name,
		Reservation:   reservation,
	}
	_, err := call(ctx, inv.agent, "Confirm", inv.agent.client.Confirm, req)
	return err
}

// rollback undoes an ADD the agent acknowledged but contiv-cni could not
// turn into a printed result (a bad reply, a failed confirmation, stdout
// closed): the runtime gets an error, so nothing may stay allocated (the
// agent's addresses, the delegate's lease). Best effort: the runtime's DEL
// after a failed ADD retries what fails here, and an unconfirmed
// reservation expires anyway.
func (inv *invocation) rollback(ctx context.Context) {
	if err := inv.del(ctx); err != nil {
		inv.log.Error("rolling back the ADD", "container", inv.args.ContainerID, "error", err)
	}
}

// del releases the container's address: the agent first, then the
// delegate (both always run; the first error wins). An unreachable agent
// is code 11 so that the runtime retries and nothing leaks silently.
func (inv *invocation) del(ctx context.Context) error {
	_, agentErr := call(ctx, inv.agent, "Delete", inv.agent.client.Delete, inv.request())
	if inv.conf.DelegateType == "" {
		return agentErr
	}
	delegateErr := inv.delegateDel(ctx)
	if agentErr != nil {
		return agentErr
	}
	return delegateErr
}

// check asks the agent whether the container still holds the addresses
// of prevResult (and the delegate, if any).
func (inv *invocation) check(ctx context.Context) error {
	req := inv.request()
	ips, err := prevIPs(inv.conf)
	if err != nil {
		return err
	}
	req.PrevIps = ips
	if inv.conf.DelegateType != "" {
		if err := inv.delegateCheck(ctx); err != nil {
			return err
		}
	}
	_, err = call(ctx, inv.agent, "Check", inv.agent.client.Check, req)
	return err
}

// gc asks the agent to release every attachment of the network that is
// not in cni.dev/valid-attachments.
func (inv *invocation) gc(ctx context.Context) error {
	req := &cni.GCRequest{Version: inv.conf.CNIVersion, NetworkName: inv.conf.Name}
	for _, att := range inv.conf.NetConf.ValidAttachments {
		req.ValidAttachments = append(req.ValidAttachments,
			&cni.Attachment{ContainerId: att.ContainerID, InterfaceName: att.IfName})
	}
	_, err := call(ctx, inv.agent, "GC", inv.agent.client.GC, req)
	return err
}

// status asks the agent whether it can serve ADD.
func (inv *invocation) status(ctx context.Context) error {
	req := &cni.StatusRequest{Version: inv.conf.CNIVersion, NetworkName: inv.conf.Name}
	_, err := call(ctx, inv.agent, "Status", inv.agent.client.Status, req)
	return err
}

// parsePrevResult parses the prevResult of nc in any supported version.
func parsePrevResult(nc *types.NetConf) error {
	if err := cniversion.ParsePrevResult(nc); err != nil {
		return confError("prevResult", "", err.Error())
	}
	return nil
}

// asCNIError keeps a *types.Error as it is and makes anything else code
// 100, so that skel prints what the caller meant.
func asCNIError(err error) error {
	var cniErr *types.Error
	if err == nil || errors.As(err, &cniErr) {
		return err
	}
	return types.NewError(uint(cni.CodeInternal), err.Error(), "")
}
