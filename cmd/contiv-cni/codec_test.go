package main

import (
	"math/rand/v2"
	"testing"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
)

// requests are the messages contiv-cni sends, in the shapes its commands
// build them: empty, full, repeated fields with empty elements.
func requests() map[string]proto.Message {
	return map[string]proto.Message{
		"empty CNIRequest": &cni.CNIRequest{},
		"ADD": &cni.CNIRequest{
			Version: "1.1.0", ContainerId: "c1", NetworkNamespace: "/var/run/netns/c1", InterfaceName: "eth0",
			ExtraNwConfig:  `{"cniVersion":"1.1.0","name":"k8s","type":"contiv-cni"}`,
			ExtraArguments: "K8S_POD_NAMESPACE=default;K8S_POD_NAME=pod-ü", NetworkName: "k8s", Confirms: true,
		},
		"ADD with a delegate": &cni.CNIRequest{
			Version: "1.0.0", ContainerId: "c2", InterfaceName: "net1", NetworkName: "n",
			IpamType: "host-local", IpamData: `[{"address":"10.1.5.7/24"},{"address":"fd00::7/64"}]`,
		},
		"CHECK": &cni.CNIRequest{
			Version: "1.0.0", ContainerId: "c3", InterfaceName: "eth0", NetworkName: "n",
			PrevIps: []string{"10.1.5.2/24", "", "fd00::2/64"},
		},
		"Confirm": &cni.ConfirmRequest{
			Version: "1.1.0", ContainerId: "c1", InterfaceName: "eth0", NetworkName: "k8s", Reservation: "r-42",
		},
		"empty Confirm": &cni.ConfirmRequest{},
		"STATUS":        &cni.StatusRequest{Version: "1.1.0", NetworkName: "k8s"},
		"GC": &cni.GCRequest{Version: "1.1.0", NetworkName: "k8s", ValidAttachments: []*cni.Attachment{
			{ContainerId: "c1", InterfaceName: "eth0"}, {}, {ContainerId: "c2"},
		}},
		"GC without attachments": &cni.GCRequest{Version: "1.1.0"},
	}
}

// TestWireCodecMarshalsAsTheRuntime: every request is encoded to the
// bytes the protobuf runtime writes.
func TestWireCodecMarshalsAsTheRuntime(t *testing.T) {
	codec := newWireCodec()
	for name, m := range requests() {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			want, err := proto.Marshal(m)
			g.Expect(err).NotTo(HaveOccurred())
			got, err := codec.Marshal(m)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Materialize()).To(Equal(want))
		})
	}
}

// TestWireCodecMarshalsRandomRequests: random strings (any runes, empty
// ones included) in every field give the runtime's bytes.
func TestWireCodecMarshalsRandomRequests(t *testing.T) {
	g := NewWithT(t)
	codec := newWireCodec()
	rng := rand.New(rand.NewPCG(1, 2))
	str := func() string {
		runes := make([]rune, rng.IntN(4)*rng.IntN(40))
		for i := range runes {
			runes[i] = rune(rng.IntN(0x2000))
		}
		return string(runes)
	}
	strs := func() []string {
		out := make([]string, rng.IntN(3))
		for i := range out {
			out[i] = str()
		}
		return out
	}
	for i := 0; i < 500; i++ {
		var atts []*cni.Attachment
		for range rng.IntN(3) {
			atts = append(atts, &cni.Attachment{ContainerId: str(), InterfaceName: str()})
		}
		for _, m := range []proto.Message{
			&cni.CNIRequest{Version: str(), ContainerId: str(), NetworkNamespace: str(), InterfaceName: str(),
				ExtraNwConfig: str(), ExtraArguments: str(), IpamType: str(), IpamData: str(), NetworkName: str(),
				PrevIps: strs(), Confirms: rng.IntN(2) == 1},
			&cni.ConfirmRequest{Version: str(), ContainerId: str(), InterfaceName: str(), NetworkName: str(), Reservation: str()},
			&cni.StatusRequest{Version: str(), NetworkName: str()},
			&cni.GCRequest{Version: str(), NetworkName: str(), ValidAttachments: atts},
		} {
			want, err := proto.Marshal(m)
			g.Expect(err).NotTo(HaveOccurred())
			got, err := codec.Marshal(m)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Materialize()).To(Equal(want), "%v", m)
		}
	}
}

// TestWireCodecLeavesTheRestToTheRuntime: a string that is not UTF-8 and
// a nil attachment fail exactly as the runtime fails them, and a message
// of another type is the runtime's.
func TestWireCodecLeavesTheRestToTheRuntime(t *testing.T) {
	codec := newWireCodec()
	for name, m := range map[string]proto.Message{
		"CNI_ARGS not UTF-8":    &cni.CNIRequest{ContainerId: "c1", ExtraArguments: "K=\xff"},
		"prev_ips not UTF-8":    &cni.CNIRequest{PrevIps: []string{"10.1.5.2/24", "\xc3"}},
		"reservation not UTF-8": &cni.ConfirmRequest{Reservation: "\xfe"},
		"attachment not UTF-8":  &cni.GCRequest{ValidAttachments: []*cni.Attachment{{ContainerId: "\xff"}}},
		"nil attachment":        &cni.GCRequest{ValidAttachments: []*cni.Attachment{nil}},
		"another message type":  &cni.CNIReply{Error: "not a request"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			want, wantErr := codec.fallback.Marshal(m)
			got, err := codec.Marshal(m)
			if wantErr != nil {
				g.Expect(err).To(MatchError(wantErr.Error()))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Materialize()).To(Equal(want.Materialize()))
		})
	}
}

// replies are agent replies of every shape: dual-stack, error, empty.
func replies() map[string]*cni.CNIReply {
	return map[string]*cni.CNIReply{
		"empty": {},
		"dual-stack with a reservation": {
			Interfaces: []*cni.CNIReply_Interface{{
				Name: "eth0", Mac: "02:00:00:00:00:01", Sandbox: "/var/run/netns/c1",
				IpAddresses: []*cni.CNIReply_Interface_IP{
					{Version: cni.CNIReply_Interface_IP_IPV4, Address: "10.1.5.2/24", Gateway: "10.1.5.1"},
					{Version: cni.CNIReply_Interface_IP_IPV6, Address: "fd00::2/64", Gateway: "fd00::1"},
				},
			}, {Name: "net1"}},
			Routes: []*cni.CNIReply_Route{{Dst: "0.0.0.0/0", Gw: "10.1.5.1"}, {Dst: "::/0", Gw: "fd00::1"}, {}},
			Dns: []*cni.CNIReply_DNS{{
				Nameservers: []string{"10.96.0.10", ""}, Domain: "cluster.local",
				Search: []string{"default.svc.cluster.local"}, Options: []string{"ndots:5"},
			}, {}},
			Reservation: "r-7",
		},
		"error":                {Result: cni.CNIReply_ERROR, ErrorCode: 102, Error: "reservation \"r-7\" expired"},
		"unknown enum value":   {Result: cni.CNIReply_Result(7), ErrorCode: 1 << 31},
		"error without a code": {Result: cni.CNIReply_ERROR},
	}
}

// TestWireCodecUnmarshalsAsTheRuntime: every reply the runtime encodes is
// decoded to an equal message, by the codec itself (parseReply accepts
// it).
func TestWireCodecUnmarshalsAsTheRuntime(t *testing.T) {
	codec := newWireCodec()
	for name, want := range replies() {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			b, err := proto.Marshal(want)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(parseReply(b, &cni.CNIReply{})).To(BeTrue())
			got := &cni.CNIReply{}
			g.Expect(codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, got)).To(Succeed())
			g.Expect(proto.Equal(got, want)).To(BeTrue(), "got %v, want %v", got, want)
		})
	}
}

// TestWireCodecUnmarshalFallsBack: a reply with a field this schema does
// not have, a known field of another wire type, a string that is not
// UTF-8 or a truncated message is not the codec's (parseReply refuses
// it); the runtime decodes it (keeping the unknown field) or fails it.
func TestWireCodecUnmarshalFallsBack(t *testing.T) {
	ok, err := proto.Marshal(&cni.CNIReply{Reservation: "r-1", Routes: []*cni.CNIReply_Route{{Dst: "0.0.0.0/0"}}})
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		data    []byte
		wantErr bool
	}{
		"unknown field":         {data: protowire.AppendVarint(protowire.AppendTag(ok, 99, protowire.VarintType), 5)},
		"error as a varint":     {data: protowire.AppendVarint(protowire.AppendTag(ok, 2, protowire.VarintType), 5)},
		"unknown route field":   {data: protowire.AppendBytes(protowire.AppendTag(nil, 4, protowire.BytesType), protowire.AppendString(protowire.AppendTag(nil, 3, protowire.BytesType), "x"))},
		"reservation not UTF-8": {data: protowire.AppendString(protowire.AppendTag(ok, 7, protowire.BytesType), "\xff"), wantErr: true},
		"truncated":             {data: ok[:len(ok)-1], wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(parseReply(tc.data, &cni.CNIReply{})).To(BeFalse())
			want := &cni.CNIReply{}
			wantErr := proto.Unmarshal(tc.data, want)
			g.Expect(wantErr != nil).To(Equal(tc.wantErr), "runtime: %v", wantErr)
			got := &cni.CNIReply{}
			err := newWireCodec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(tc.data)}, got)
			if tc.wantErr {
				g.Expect(err).To(MatchError(wantErr.Error()))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(proto.Equal(got, want)).To(BeTrue(), "got %v, want %v", got, want)
		})
	}
}

// FuzzWireCodecUnmarshal: whatever the bytes, the codec decodes a reply
// as the runtime does (both fail, or both give equal messages).
func FuzzWireCodecUnmarshal(f *testing.F) {
	for _, r := range replies() {
		b, err := proto.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x1a, 0x02, 0x22, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		want := &cni.CNIReply{}
		wantErr := proto.Unmarshal(data, want)
		got := &cni.CNIReply{}
		err := newWireCodec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(data)}, got)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("codec error %v, runtime error %v", err, wantErr)
		}
		if err == nil && !proto.Equal(got, want) {
			t.Fatalf("codec %v, runtime %v", got, want)
		}
	})
}
