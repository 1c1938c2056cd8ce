// Command fakeipam is a tiny host-local-like IPAM plugin for the tests of
// contiv-cni's external IPAM delegation. It appends each CNI_COMMAND it
// receives to $FAKE_IPAM_LOG, fails with code 42 when $FAKE_IPAM_FAIL
// names the command, and answers ADD in the config's version with the
// addresses of $FAKE_IPAM_ADDRS ("CIDR@gateway", separated by spaces, in
// that order; default "10.9.0.5/24@10.9.0.1").
package main

import (
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
)

func record(cmd string) error {
	if path := os.Getenv("FAKE_IPAM_LOG"); path != "" {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintln(f, cmd); err != nil {
			_ = f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	if strings.EqualFold(os.Getenv("FAKE_IPAM_FAIL"), cmd) {
		return types.NewError(42, "fake IPAM failed "+cmd, "")
	}
	return nil
}

func add(args *skel.CmdArgs) error {
	if err := record("ADD"); err != nil {
		return err
	}
	conf, err := (&version.ConfigDecoder{}).Decode(args.StdinData)
	if err != nil {
		return err
	}
	spec := os.Getenv("FAKE_IPAM_ADDRS")
	if spec == "" {
		spec = "10.9.0.5/24@10.9.0.1"
	}
	res := &types100.Result{CNIVersion: types100.ImplementedSpecVersion}
	for _, a := range strings.Fields(spec) {
		cidr, gw, _ := strings.Cut(a, "@")
		addr, err := types.ParseCIDR(cidr)
		if err != nil {
			return err
		}
		res.IPs = append(res.IPs, &types100.IPConfig{Address: *addr, Gateway: net.ParseIP(gw)})
	}
	return types.PrintResult(res, conf)
}

func main() {
	skel.PluginMainFuncs(skel.CNIFuncs{
		Add:    add,
		Del:    func(*skel.CmdArgs) error { return record("DEL") },
		Check:  func(*skel.CmdArgs) error { return record("CHECK") },
		GC:     func(*skel.CmdArgs) error { return record("GC") },
		Status: func(*skel.CmdArgs) error { return record("STATUS") },
	}, version.All, "fakeipam")
}
