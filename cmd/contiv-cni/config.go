package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/types"
)

// PluginType is the "type" under which the runtime (or ptp, bridge,
// macvlan, ipvlan) finds this binary on CNI_PATH.
const PluginType = "contiv-cni"

// DefaultGRPCTimeout bounds every call to the agent when the config sets
// no grpcTimeout.
const DefaultGRPCTimeout = 10 * time.Second

// Mode is how the runtime uses contiv-cni.
type Mode int

const (
	// ModePlugin: the network plugin of a conflist ("type":"contiv-cni");
	// it returns the full result (interfaces, ips with interface 0).
	ModePlugin Mode = iota
	// ModeIPAM: the IPAM plugin of ptp, bridge, macvlan or ipvlan
	// ("ipam":{"type":"contiv-cni"}); it returns the abbreviated result.
	ModeIPAM
)

// String names the mode.
func (m Mode) String() string {
	if m == ModeIPAM {
		return "ipam"
	}
	return "plugin"
}

// Config is the parsed network config of one call.
type Config struct {
	Mode Mode
	// CNIVersion and Name are the network config's cniVersion and name.
	CNIVersion string
	Name       string
	// Target is the gRPC target of the agent ("unix:///path" or
	// "dns:///host:port"); Server is grpcServer as written, for messages.
	Target string
	Server string
	// Timeout bounds each call to the agent and to the delegate.
	Timeout time.Duration
	// LogFile is where the logs are appended; empty: no logs.
	LogFile string
	// DelegateType is the type of the ipam section that contiv-cni runs
	// itself before calling the agent (plugin mode only; empty: none).
	DelegateType string
	// NetConf is the standard part (prevResult, valid attachments).
	NetConf types.NetConf
}

// agentKeys are the keys contiv-cni reads at the top level and in an
// ipam section of its own type.
type agentKeys struct {
	GRPCServer  *string `json:"grpcServer"`
	GRPCTimeout *string `json:"grpcTimeout"`
	LogFile     *string `json:"logFile"`
}

// topConf is the top level of the network config. Other keys are allowed:
// the runtime and other plugins add their own.
type topConf struct {
	types.NetConf
	agentKeys
	RawIPAM json.RawMessage `json:"ipam,omitempty"`
}

// ownIPAM is an ipam section of contiv-cni's own type; it is decoded
// strictly (a typo must not pass silently).
type ownIPAM struct {
	Type string `json:"type"`
	agentKeys
}

// confError is the error of a bad network config: code 7, naming the
// field and its value.
func confError(field, value, reason string) *types.Error {
	return types.NewError(types.ErrInvalidNetworkConfig,
		fmt.Sprintf("network config: %s %q: %s", field, value, reason), "")
}

// ParseConfig parses the network config of a call (stdin). self is the
// type name of this binary (PluginType, or the name it was run as). Every
// error is a *types.Error with code 7 whose message names the field and
// the value.
func ParseConfig(stdin []byte, self string) (*Config, error) {
	top, err := decodeTop(stdin)
	if err != nil {
		return nil, err
	}
	own, err := decodeIPAM(top, self)
	if err != nil {
		return nil, err
	}
	conf := &Config{CNIVersion: top.CNIVersion, Name: top.Name, NetConf: top.NetConf}
	keys, err := conf.pickMode(top, own, self)
	if err != nil {
		return nil, err
	}
	if err := conf.applyKeys(keys); err != nil {
		return nil, err
	}
	return conf, nil
}

func decodeTop(stdin []byte) (*topConf, error) {
	var top topConf
	if err := json.Unmarshal(stdin, &top); err != nil {
		return nil, jsonError("", stdin, err)
	}
	if top.Name == "" {
		return nil, confError("name", "", "missing")
	}
	return &top, nil
}

// decodeIPAM reads the type of the ipam section into top.IPAM and, when it
// is contiv-cni's own type, decodes the section; a delegate's section is
// left to the delegate.
func decodeIPAM(top *topConf, self string) (*ownIPAM, error) {
	raw := top.RawIPAM
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if err := json.Unmarshal(raw, &top.IPAM); err != nil {
		return nil, jsonError("ipam.", raw, err)
	}
	if top.IPAM.Type == "" {
		return nil, confError("ipam.type", "", "missing")
	}
	if top.IPAM.Type != self && top.IPAM.Type != PluginType {
		return nil, nil
	}
	var own ownIPAM
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&own); err != nil {
		return nil, jsonError("ipam.", raw, err)
	}
	return &own, nil
}

// jsonError turns a decoding error into a code 7 error that names the
// field (prefix + the JSON path) and what was wrong with it.
func jsonError(prefix string, data []byte, err error) *types.Error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		field := strings.TrimPrefix(strings.TrimPrefix(typeErr.Field, "NetConf."), "agentKeys.")
		return confError(fieldName(prefix, field), typeErr.Value,
			"must be "+jsonKind(typeErr.Type.Kind())+", not "+typeErr.Value)
	}
	var syntaxErr *json.SyntaxError
	if errors.As(err, &syntaxErr) {
		return confError(fieldName(prefix, ""), shorten(data),
			fmt.Sprintf("invalid JSON at offset %d: %v", syntaxErr.Offset, syntaxErr))
	}
	if key, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return confError(fieldName(prefix, strings.Trim(key, `"`)), "", "unknown key")
	}
	return confError(fieldName(prefix, ""), shorten(data), err.Error())
}

// jsonKind names a Go kind as the JSON value it decodes from.
func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	default:
		return "a number"
	}
}

// fieldName joins a prefix ("" or "ipam.") and a JSON path; the empty
// name is the whole document.
func fieldName(prefix, field string) string {
	if name := strings.TrimSuffix(prefix+field, "."); name != "" {
		return name
	}
	return "(document)"
}

// shorten keeps messages readable when the value is a whole document.
func shorten(data []byte) string {
	const max = 64
	if len(data) > max {
		return string(data[:max]) + "..."
	}
	return string(data)
}

// pickMode decides the mode and returns the keys that configure the
// agent connection: in plugin mode the top level wins, in IPAM mode the
// ipam section wins; the other one fills what is missing.
func (c *Config) pickMode(top *topConf, own *ownIPAM, self string) (agentKeys, error) {
	switch {
	case top.Type == self || top.Type == PluginType:
		c.Mode = ModePlugin
		if own == nil {
			c.DelegateType = top.IPAM.Type
			return top.agentKeys, nil
		}
		return merge(top.agentKeys, own.agentKeys), nil
	case own != nil:
		c.Mode = ModeIPAM
		return merge(own.agentKeys, top.agentKeys), nil
	default:
		return agentKeys{}, confError("type", top.Type,
			fmt.Sprintf("neither type nor ipam.type (%q) is %q", top.IPAM.Type, PluginType))
	}
}

// merge returns first, with the keys it lacks taken from second.
func merge(first, second agentKeys) agentKeys {
	if first.GRPCServer == nil {
		first.GRPCServer = second.GRPCServer
	}
	if first.GRPCTimeout == nil {
		first.GRPCTimeout = second.GRPCTimeout
	}
	if first.LogFile == nil {
		first.LogFile = second.LogFile
	}
	return first
}

func (c *Config) applyKeys(k agentKeys) error {
	if k.GRPCServer == nil || *k.GRPCServer == "" {
		return confError("grpcServer", "", "missing: the agent's CNI socket (a unix path or host:port)")
	}
	target, err := grpcTarget(*k.GRPCServer)
	if err != nil {
		return err
	}
	c.Server, c.Target = *k.GRPCServer, target
	c.Timeout = DefaultGRPCTimeout
	if k.GRPCTimeout != nil {
		d, err := time.ParseDuration(*k.GRPCTimeout)
		if err != nil {
			return confError("grpcTimeout", *k.GRPCTimeout, "not a Go duration such as \"10s\"")
		}
		if d <= 0 {
			return confError("grpcTimeout", *k.GRPCTimeout, "must be positive")
		}
		c.Timeout = d
	}
	if k.LogFile != nil {
		c.LogFile = *k.LogFile
	}
	return nil
}

// grpcTarget turns grpcServer into a gRPC target: "/path", "unix:/path"
// and "unix:///path" are unix sockets (absolute paths only: the runtime's
// working directory is unknown); "host:port" is TCP.
func grpcTarget(server string) (string, error) {
	path, isUnix := strings.CutPrefix(server, "unix://")
	if !isUnix {
		path, isUnix = strings.CutPrefix(server, "unix:")
	}
	if isUnix || strings.HasPrefix(server, "/") || strings.HasPrefix(server, ".") {
		if !strings.HasPrefix(path, "/") || strings.ContainsRune(path, 0) {
			return "", confError("grpcServer", server, "a unix socket must be an absolute path")
		}
		return "unix://" + path, nil
	}
	host, port, err := net.SplitHostPort(server)
	if err != nil {
		return "", confError("grpcServer", server, "neither an absolute unix socket path nor host:port")
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return "", confError("grpcServer", server, "the port must be a number in 1..65535")
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return "dns:///" + net.JoinHostPort(host, port), nil
}
