package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
)

// agent is the connection to the agent's RemoteCNI service for one call
// of contiv-cni. It is owned by the command that opened it and closed by
// it; it is not shared.
type agent struct {
	conf   *Config
	conn   *grpc.ClientConn
	client cni.RemoteCNIClient
}

// dialAgent prepares the connection; grpc.NewClient does not connect, the
// first call does (and fails fast when nobody listens). The options fit a
// process that makes one to three calls and exits (dialOptions).
func dialAgent(conf *Config) (*agent, error) {
	target, opts := dialOptions(conf.Target)
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, confError("grpcServer", conf.Server, err.Error())
	}
	return &agent{conf: conf, conn: conn, client: cni.NewRemoteCNIClient(conn)}, nil
}

// windowSize is the static HTTP/2 window of the connection and of each
// call, far above any CNI message.
const windowSize = 1 << 20

// dialOptions returns the target and options of the agent connection:
//   - a unix socket is dialled directly (the passthrough resolver and a
//     dialer of the socket path, :authority "localhost" as before);
//   - static flow-control windows: no BDP pings on a connection that
//     carries a few hundred bytes;
//   - no idleness timer (the process ends long before 30 minutes).
func dialOptions(target string) (string, []grpc.DialOption) {
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStaticStreamWindowSize(windowSize),
		grpc.WithStaticConnWindowSize(windowSize),
		grpc.WithIdleTimeout(0),
	}
	if path, ok := strings.CutPrefix(target, "unix://"); ok {
		target = "passthrough:///" + path
		// The unix resolver's authority, not the socket path.
		opts = append(opts, grpc.WithContextDialer(dialUnix), grpc.WithAuthority("localhost"))
	}
	return target, opts
}

// dialUnix connects to the agent's unix socket at path.
func dialUnix(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", path)
}

// Close closes the connection.
func (a *agent) Close() error { return a.conn.Close() }

// rpc is one method of the RemoteCNI client.
type rpc[Req any] func(ctx context.Context, req Req, opts ...grpc.CallOption) (*cni.CNIReply, error)

// call runs one RPC under the config's timeout and turns every failure
// into a *types.Error: code 11 when the agent is unreachable or too slow,
// the reply's error_code (100 when 0) when the agent says ERROR.
func call[Req any](ctx context.Context, a *agent, name string, method rpc[Req], req Req) (*cni.CNIReply, error) {
	ctx, cancel := context.WithTimeout(ctx, a.conf.Timeout)
	defer cancel()
	reply, err := method(ctx, req)
	if err != nil {
		return nil, a.transportError(name, timedOut(ctx, err))
	}
	if reply.GetResult() == cni.CNIReply_ERROR {
		code := reply.GetErrorCode()
		if code == 0 {
			code = cni.CodeInternal
		}
		msg := reply.GetError()
		if msg == "" {
			msg = fmt.Sprintf("the agent's %s failed without a message", name)
		}
		return nil, types.NewError(uint(code), msg, "")
	}
	return reply, nil
}

// tryAgainBudget bounds how long callUntil repeats a call the agent
// answered with "try again later".
const tryAgainBudget = 2 * time.Second

// callUntil is call, repeated while the agent answers "try again later"
// (code 11: it is not ready, or its pools are full and a block is on its
// way from nodeipam), with a backoff from 20 ms to 320 ms, for up to
// tryAgainBudget (or the config's timeout, if shorter): an ADD waits out
// a pool's growth (milliseconds) instead of failing. A transport failure
// is not repeated (the runtime retries).
func callUntil[Req any](ctx context.Context, a *agent, name string, method rpc[Req], req Req) (*cni.CNIReply, error) {
	ctx, cancel := context.WithTimeout(ctx, min(a.conf.Timeout, tryAgainBudget))
	defer cancel()
	backoff := 20 * time.Millisecond
	for {
		reply, err := method(ctx, req)
		if err != nil {
			return nil, a.transportError(name, timedOut(ctx, err))
		}
		if reply.GetResult() != cni.CNIReply_ERROR || uint(reply.GetErrorCode()) != types.ErrTryAgainLater {
			return call(ctx, a, name, func(context.Context, Req, ...grpc.CallOption) (*cni.CNIReply, error) { return reply, nil }, req)
		}
		select {
		case <-ctx.Done():
			return nil, types.NewError(types.ErrTryAgainLater, reply.GetError(), "")
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 320*time.Millisecond)
	}
}

// timedOut is err, or DeadlineExceeded when the call's own deadline has
// passed: the agent ending the stream at the same deadline (its
// grpc-timeout) reaches the client as Canceled when it wins the race, and
// the runtime should read that the call timed out.
func timedOut(ctx context.Context, err error) error {
	if st := status.Convert(err); st.Code() == codes.Canceled && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return status.Error(codes.DeadlineExceeded, st.Message())
	}
	return err
}

// transportError maps a gRPC failure: unreachable, refused, deadline and
// cancellation are "try again later" (11); anything else (an agent too old
// for the call, an internal gRPC error) is ours (100).
func (a *agent) transportError(name string, err error) *types.Error {
	st := status.Convert(err)
	switch st.Code() {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return types.NewError(types.ErrTryAgainLater,
			fmt.Sprintf("agent unreachable at grpcServer %q (%s, timeout %s): %s: %s; try again later",
				a.conf.Server, name, a.conf.Timeout, st.Code(), st.Message()), "")
	default:
		return types.NewError(uint(cni.CodeInternal),
			fmt.Sprintf("agent at grpcServer %q failed %s: %s: %s",
				a.conf.Server, name, st.Code(), st.Message()), "")
	}
}
