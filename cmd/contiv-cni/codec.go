package main

import (
	"unicode/utf8"

	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
)

// wireCodec is the gRPC codec of contiv-cni's calls. It writes the
// requests and reads the reply of the RemoteCNI service field by field
// (protowire) instead of through the protobuf runtime, whose first use of
// a message type in a process builds that type's coders by reflection:
// in a process that makes one or two calls, that costs more than the
// calls' encoding itself. The bytes are the ones the runtime writes
// (field order, proto3 defaults left out), and the agent sees no
// difference.
//
// What it does not handle goes to the runtime's codec, so that every
// error is the runtime's own: a message of another type, a string that is
// not valid UTF-8 (the runtime refuses to send it), a nil attachment, and
// a reply with a field or wire type this version of the schema does not
// have, or that is malformed (the runtime keeps unknown fields, or says
// what is wrong).
type wireCodec struct {
	fallback encoding.CodecV2
}

var _ encoding.CodecV2 = wireCodec{}

func newWireCodec() wireCodec {
	return wireCodec{fallback: encoding.GetCodecV2(protocodec.Name)}
}

// Name is the runtime codec's name: the call's content type stays
// application/grpc+proto, which every gRPC server decodes with protobuf.
func (wireCodec) Name() string { return protocodec.Name }

// Marshal encodes the four request types itself and hands anything else
// (and a request with a string that is not UTF-8) to the runtime.
func (c wireCodec) Marshal(v any) (mem.BufferSlice, error) {
	var w wireWriter
	switch m := v.(type) {
	case *cni.CNIRequest:
		w.cniRequest(m)
	case *cni.ConfirmRequest:
		w.confirmRequest(m)
	case *cni.StatusRequest:
		w.string(1, m.Version)
		w.string(2, m.NetworkName)
	case *cni.GCRequest:
		w.gcRequest(m)
	default:
		return c.fallback.Marshal(v)
	}
	if w.invalid {
		return c.fallback.Marshal(v)
	}
	return mem.BufferSlice{mem.SliceBuffer(w.buf)}, nil
}

// Unmarshal decodes a CNIReply itself; anything else, and a reply it
// does not fully understand, is the runtime's.
func (c wireCodec) Unmarshal(data mem.BufferSlice, v any) error {
	reply, ok := v.(*cni.CNIReply)
	if !ok {
		return c.fallback.Unmarshal(data, v)
	}
	var parsed cni.CNIReply
	if parseReply(data.Materialize(), &parsed) {
		reply.Result, reply.Error, reply.ErrorCode = parsed.Result, parsed.Error, parsed.ErrorCode
		reply.Interfaces, reply.Routes, reply.Dns = parsed.Interfaces, parsed.Routes, parsed.Dns
		reply.Reservation = parsed.Reservation
		return nil
	}
	return c.fallback.Unmarshal(data, v)
}

// wireWriter appends proto3 fields in field-number order, leaving out
// empty strings and false; invalid is set by what the runtime must handle
// (a string that is not UTF-8, a nil attachment).
type wireWriter struct {
	buf     []byte
	invalid bool
}

func (w *wireWriter) string(num protowire.Number, s string) {
	if s != "" {
		w.repeatedString(num, s)
	}
}

// repeatedString writes s even when it is empty (an element of a
// repeated field).
func (w *wireWriter) repeatedString(num protowire.Number, s string) {
	if !utf8.ValidString(s) {
		w.invalid = true
	}
	w.buf = protowire.AppendTag(w.buf, num, protowire.BytesType)
	w.buf = protowire.AppendString(w.buf, s)
}

func (w *wireWriter) bool(num protowire.Number, b bool) {
	if b {
		w.buf = protowire.AppendTag(w.buf, num, protowire.VarintType)
		w.buf = protowire.AppendVarint(w.buf, 1)
	}
}

func (w *wireWriter) cniRequest(m *cni.CNIRequest) {
	w.string(1, m.Version)
	w.string(2, m.ContainerId)
	w.string(3, m.NetworkNamespace)
	w.string(4, m.InterfaceName)
	w.string(5, m.ExtraNwConfig)
	w.string(6, m.ExtraArguments)
	w.string(7, m.IpamType)
	w.string(8, m.IpamData)
	w.string(9, m.NetworkName)
	for _, ip := range m.PrevIps {
		w.repeatedString(10, ip)
	}
	w.bool(11, m.Confirms)
}

func (w *wireWriter) confirmRequest(m *cni.ConfirmRequest) {
	w.string(1, m.Version)
	w.string(2, m.ContainerId)
	w.string(3, m.InterfaceName)
	w.string(4, m.NetworkName)
	w.string(5, m.Reservation)
}

func (w *wireWriter) gcRequest(m *cni.GCRequest) {
	w.string(1, m.Version)
	w.string(2, m.NetworkName)
	for _, a := range m.ValidAttachments {
		if a == nil { // the runtime's to refuse or encode
			w.invalid = true
			return
		}
		var sub wireWriter
		sub.string(1, a.ContainerId)
		sub.string(2, a.InterfaceName)
		w.invalid = w.invalid || sub.invalid
		w.buf = protowire.AppendTag(w.buf, 3, protowire.BytesType)
		w.buf = protowire.AppendBytes(w.buf, sub.buf)
	}
}

// wireReader reads the fields of one message; ok turns false at the
// first thing it does not expect (the caller then falls back to the
// runtime).
type wireReader struct {
	b  []byte
	ok bool
}

// next returns the next field's number and type; false at the end or on
// a malformed tag.
func (r *wireReader) next() (protowire.Number, protowire.Type, bool) {
	if !r.ok || len(r.b) == 0 {
		return 0, 0, false
	}
	num, typ, n := protowire.ConsumeTag(r.b)
	if n < 0 {
		r.ok = false
		return 0, 0, false
	}
	r.b = r.b[n:]
	return num, typ, true
}

// bytes reads a length-delimited value of a field of type typ.
func (r *wireReader) bytes(typ protowire.Type) []byte {
	if typ != protowire.BytesType {
		r.ok = false
		return nil
	}
	v, n := protowire.ConsumeBytes(r.b)
	if n < 0 {
		r.ok = false
		return nil
	}
	r.b = r.b[n:]
	return v
}

// string reads a string field; a value that is not UTF-8 is not ours
// (the runtime rejects it).
func (r *wireReader) string(typ protowire.Type) string {
	v := r.bytes(typ)
	if !utf8.Valid(v) {
		r.ok = false
	}
	return string(v)
}

func (r *wireReader) varint(typ protowire.Type) uint64 {
	if typ != protowire.VarintType {
		r.ok = false
		return 0
	}
	v, n := protowire.ConsumeVarint(r.b)
	if n < 0 {
		r.ok = false
		return 0
	}
	r.b = r.b[n:]
	return v
}

// message runs parse on the value of a message field; false when either
// fails.
func (r *wireReader) message(typ protowire.Type, parse func(*wireReader)) {
	b := r.bytes(typ)
	if !r.ok {
		return
	}
	sub := wireReader{b: b, ok: true}
	parse(&sub)
	r.ok = r.ok && sub.ok
}

// parseReply decodes b into reply; false when b has anything this schema
// does not know or is malformed (reply is then partly filled).
func parseReply(b []byte, reply *cni.CNIReply) bool {
	r := wireReader{b: b, ok: true}
	for num, typ, more := r.next(); more; num, typ, more = r.next() {
		switch num {
		case 1:
			reply.Result = cni.CNIReply_Result(int32(r.varint(typ)))
		case 2:
			reply.Error = r.string(typ)
		case 3:
			ifc := &cni.CNIReply_Interface{}
			r.message(typ, func(sub *wireReader) { parseInterface(sub, ifc) })
			reply.Interfaces = append(reply.Interfaces, ifc)
		case 4:
			route := &cni.CNIReply_Route{}
			r.message(typ, func(sub *wireReader) { parseRoute(sub, route) })
			reply.Routes = append(reply.Routes, route)
		case 5:
			dns := &cni.CNIReply_DNS{}
			r.message(typ, func(sub *wireReader) { parseDNS(sub, dns) })
			reply.Dns = append(reply.Dns, dns)
		case 6:
			reply.ErrorCode = uint32(r.varint(typ))
		case 7:
			reply.Reservation = r.string(typ)
		default:
			r.ok = false
		}
	}
	return r.ok
}

func parseInterface(r *wireReader, ifc *cni.CNIReply_Interface) {
	for num, typ, more := r.next(); more; num, typ, more = r.next() {
		switch num {
		case 1:
			ifc.Name = r.string(typ)
		case 2:
			ifc.Mac = r.string(typ)
		case 3:
			ifc.Sandbox = r.string(typ)
		case 4:
			ip := &cni.CNIReply_Interface_IP{}
			r.message(typ, func(sub *wireReader) { parseIP(sub, ip) })
			ifc.IpAddresses = append(ifc.IpAddresses, ip)
		default:
			r.ok = false
		}
	}
}

func parseIP(r *wireReader, ip *cni.CNIReply_Interface_IP) {
	for num, typ, more := r.next(); more; num, typ, more = r.next() {
		switch num {
		case 1:
			ip.Version = cni.CNIReply_Interface_IP_Version(int32(r.varint(typ)))
		case 2:
			ip.Address = r.string(typ)
		case 3:
			ip.Gateway = r.string(typ)
		default:
			r.ok = false
		}
	}
}

func parseRoute(r *wireReader, route *cni.CNIReply_Route) {
	for num, typ, more := r.next(); more; num, typ, more = r.next() {
		switch num {
		case 1:
			route.Dst = r.string(typ)
		case 2:
			route.Gw = r.string(typ)
		default:
			r.ok = false
		}
	}
}

func parseDNS(r *wireReader, dns *cni.CNIReply_DNS) {
	for num, typ, more := r.next(); more; num, typ, more = r.next() {
		switch num {
		case 1:
			dns.Nameservers = append(dns.Nameservers, r.string(typ))
		case 2:
			dns.Domain = r.string(typ)
		case 3:
			dns.Search = append(dns.Search, r.string(typ))
		case 4:
			dns.Options = append(dns.Options, r.string(typ))
		default:
			r.ok = false
		}
	}
}
