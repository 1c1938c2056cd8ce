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
	args  *skel.CmdArgs
	conf  *Config
	agent *agent
	log   *slog.Logger
	close func()
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
// connection; the caller defers inv.end().
func begin(args *skel.CmdArgs) (*invocation, error) {
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
	inv := &invocation{args: args, conf: conf, agent: a, log: log}
	inv.close = func() {
		if err := a.Close(); err != nil {
			log.Debug("closing the agent connection", "error", err)
		}
		closeLog()
	}
	log.Debug("call", "command", os.Getenv("CNI_COMMAND"), "container", args.ContainerID,
		"ifname", args.IfName, "netns", args.Netns, "network", conf.Name, "mode", conf.Mode.String(),
		"delegate", conf.DelegateType)
	return inv, nil
}

func (inv *invocation) end(err error) error {
	if err != nil {
		inv.log.Error("failed", "command", os.Getenv("CNI_COMMAND"), "container", inv.args.ContainerID, "error", err)
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

// cmdAdd asks the agent for the container's address (after running the
// delegate, if any) and prints the result in the config's version.
func cmdAdd(args *skel.CmdArgs) error {
	inv, err := begin(args)
	if err != nil {
		return err
	}
	return inv.end(inv.add(context.Background()))
}

func (inv *invocation) add(ctx context.Context) error {
	if inv.conf.Mode == ModePlugin && inv.conf.NetConf.RawPrevResult != nil {
		return confError("prevResult", "(set)",
			"contiv-cni is a main plugin and cannot be chained after another plugin")
	}
	req := inv.request()
	var reply *cni.CNIReply
	var err error
	if inv.conf.DelegateType != "" {
		reply, err = inv.addWithDelegate(ctx, req)
	} else {
		reply, err = call(ctx, inv.agent, "Add", inv.agent.client.Add, req)
	}
	if err != nil {
		return err
	}
	res, err := toResult(reply, inv.conf.Mode, inv.args)
	if err != nil {
		return err
	}
	inv.log.Info("added", "container", inv.args.ContainerID, "ips", len(res.IPs))
	return types.PrintResult(res, inv.conf.CNIVersion)
}

// cmdDel releases the container's address: the agent first, then the
// delegate (both always run; the first error wins). An unreachable agent
// is code 11 so that the runtime retries and nothing leaks silently.
func cmdDel(args *skel.CmdArgs) error {
	inv, err := begin(args)
	if err != nil {
		return err
	}
	return inv.end(inv.del(context.Background()))
}

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

// cmdCheck asks the agent whether the container still holds the
// addresses of prevResult (and the delegate, if any).
func cmdCheck(args *skel.CmdArgs) error {
	inv, err := begin(args)
	if err != nil {
		return err
	}
	return inv.end(inv.check(context.Background()))
}

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

// cmdGC asks the agent to release every attachment of the network that is
// not in cni.dev/valid-attachments.
func cmdGC(args *skel.CmdArgs) error {
	inv, err := begin(args)
	if err != nil {
		return err
	}
	return inv.end(inv.gc(context.Background()))
}

func (inv *invocation) gc(ctx context.Context) error {
	req := &cni.GCRequest{Version: inv.conf.CNIVersion, NetworkName: inv.conf.Name}
	for _, att := range inv.conf.NetConf.ValidAttachments {
		req.ValidAttachments = append(req.ValidAttachments,
			&cni.Attachment{ContainerId: att.ContainerID, InterfaceName: att.IfName})
	}
	_, err := call(ctx, inv.agent, "GC", inv.agent.client.GC, req)
	return err
}

// cmdStatus asks the agent whether it can serve ADD.
func cmdStatus(args *skel.CmdArgs) error {
	inv, err := begin(args)
	if err != nil {
		return err
	}
	return inv.end(inv.status(context.Background()))
}

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
