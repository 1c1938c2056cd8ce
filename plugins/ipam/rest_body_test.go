package ipam

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"testing"

	"github.com/google/uuid"
	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/engine/ipalloc"
	"github.com/contiv-ipam/agent/plugins/ipam/keeper"
)

// FuzzOperatorBody feeds arbitrary bodies to the decoder of every
// operator call: never a panic; a refusal is a short bodyError; an
// accepted body holds only the call's fields, each valid, and encodes
// back to a body that decodes to the same request.
func FuzzOperatorBody(f *testing.F) {
	for _, seed := range []string{
		`{"ip": "10.1.5.9", "owner": "appliance"}`,
		`{"ip": "fe10:f00d::a", "owner": "kube-system/coredns-5d78c9869d-x2k4p"}`,
		`{"owner": "router", "family": "ipv6", "timeout": "5m"}`,
		`{"owner": "router", "family": "", "timeout": "1h0m0.5s"}`,
		`{"ip": "::ffff:10.1.5.9", "uuid": "0B0C2F4E-1111-4000-8000-000000000000"}`,
		`{"ip": "10.1.5.9", "uuid": "{0b0c2f4e-1111-4000-8000-000000000000}"}`,
		`{"owner": "x"}`, `{"ip": "fe80::1%eth0"}`, `{}`, ``, ` `, `null`, `[]`, `"ip"`, `{"ip": 7}`,
		`{"ip": "10.1.5.9", "ip": "10.1.5.9"}`, `{"IP": "10.1.5.9"}`, `{"ip": "10.1.5.9"} {}`, `{"ip": "10.1.5.9"`,
		`{"owner": "\u0000"}`, `{"owner": "a\u2028b"}`, `{"owner": "\ud800"}`, `{"timeout": "-1s"}`, `{"timeout": "9223372036s"}`,
		`{"owner": {"nested": ["x"]}}`, `{"owner": "x",}`, `{,}`, `{"a":1}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		for i := range operatorOps {
			op := &operatorOps[i]
			req, err := decodeOperatorBody([]byte(body), op.name, op.fields)
			if err != nil {
				var be *bodyError
				if !errors.As(err, &be) || !errors.Is(err, errBadBody) {
					t.Fatalf("%s: %q: error %v is not a bodyError", op.name, body, err)
				}
				if n := len(err.Error()); n == 0 || n > 512 {
					t.Fatalf("%s: %q: error of %d bytes: %v", op.name, body, n, err)
				}
				continue
			}
			if req.set&^op.fields != 0 {
				t.Fatalf("%s: %q: fields %s beyond %s", op.name, body, req.set.names(), op.fields.names())
			}
			checkDecoded(t, op.name, body, &req)
			again, err := decodeOperatorBody(encodeRequest(&req), op.name, op.fields)
			if err != nil || again != req {
				t.Fatalf("%s: %q: decoded %+v, its encoding decodes to %+v, %v", op.name, body, req, again, err)
			}
		}
	})
}

// checkDecoded checks every field of an accepted request.
func checkDecoded(t *testing.T, op, body string, r *operatorRequest) {
	t.Helper()
	if r.has(fieldIP) && (!r.ip.IsValid() || r.ip.Zone() != "" || r.ip.Is4In6()) {
		t.Fatalf("%s: %q: ip %v", op, body, r.ip)
	}
	if r.has(fieldOwner) && keeper.CheckOwner(r.owner) != nil {
		t.Fatalf("%s: %q: owner %q: %v", op, body, r.owner, keeper.CheckOwner(r.owner))
	}
	if r.has(fieldTimeout) && r.timeout <= 0 {
		t.Fatalf("%s: %q: timeout %v", op, body, r.timeout)
	}
	if r.has(fieldFamily) && r.family != IPv4 && r.family != IPv6 && r.family != "" {
		t.Fatalf("%s: %q: family %q", op, body, r.family)
	}
	if r.has(fieldUUID) {
		if id, err := uuid.Parse(r.uuid); err != nil || id.String() != r.uuid {
			t.Fatalf("%s: %q: uuid %q", op, body, r.uuid)
		}
	}
}

// encodeRequest is the body of r's fields in canonical form.
func encodeRequest(r *operatorRequest) []byte {
	m := map[string]string{}
	if r.has(fieldIP) {
		m["ip"] = r.ip.String()
	}
	if r.has(fieldFamily) {
		m["family"] = string(r.family)
	}
	if r.has(fieldOwner) {
		m["owner"] = r.owner
	}
	if r.has(fieldTimeout) {
		m["timeout"] = r.timeout.String()
	}
	if r.has(fieldUUID) {
		m["uuid"] = r.uuid
	}
	b, _ := json.Marshal(m)
	return b
}

func TestOperatorBodiesAreCanonicalised(t *testing.T) {
	g := NewWithT(t)
	req, err := decodeOperatorBody([]byte(`{"ip": "::ffff:10.1.5.9", "uuid": "{0B0C2F4E-1111-4000-8000-000000000000}"}`), "confirm", fieldIP|fieldUUID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(req.ip).To(Equal(netip.MustParseAddr("10.1.5.9")), "an IPv4-mapped address is the IPv4 one")
	g.Expect(req.uuid).To(Equal("0b0c2f4e-1111-4000-8000-000000000000"))
	g.Expect(req.set).To(Equal(fieldIP | fieldUUID))
}

// Every error of the calls maps to its status and reason, ErrTimerExists
// too (no operator call starts a timer on an existing allocation).
func TestOperatorStatusOfEveryError(t *testing.T) {
	cases := []struct {
		err    error
		status int
		reason string
	}{
		{&refusal{http.StatusForbidden, "forbidden", errNoClientAuth}, 403, "forbidden"},
		{&bodyError{field: "ip", msg: "missing"}, 400, "bad-request"},
		{fmt.Errorf("x: %w", keeper.ErrNotReady), 503, "not-ready"},
		{keeper.ErrClosed, 503, "not-ready"},
		{fmt.Errorf("x: %w", ErrNodeIDLost), 503, "node-id-lost"},
		{errExternalIPAM, 409, "external-ipam"},
		{fmt.Errorf("x: %w", ErrNotAllocated), 404, "not-allocated"},
		{fmt.Errorf("x: %w", ipalloc.ErrNotAllocated), 404, "not-allocated"},
		{fmt.Errorf("x: %w", ipalloc.ErrTaken), 409, "taken"},
		{fmt.Errorf("x: %w", ErrExcluded), 409, "excluded"},
		{fmt.Errorf("x: %w", ErrReservationMismatch), 409, "reservation-mismatch"},
		{fmt.Errorf("x: %w", ErrTimerExists), 409, "timer-exists"},
		{fmt.Errorf("x: %w", ipalloc.ErrPoolExhausted), 409, "exhausted"},
		{fmt.Errorf("x: %w", ErrIPv4Disabled), 422, "family-disabled"},
		{fmt.Errorf("x: %w", ErrIPv6Disabled), 422, "family-disabled"},
		{fmt.Errorf("x: %w", ipalloc.ErrOutOfRange), 422, "out-of-range"},
		{fmt.Errorf("x: %w", ipalloc.ErrReserved), 422, "reserved"},
		{fmt.Errorf("x: %w: %w", keeper.ErrUnknownOutcome, errors.New("disk")), 500, "internal"},
		{errors.Join(nil, fmt.Errorf("releasing: %w", errors.New("disk"))), 500, "internal"},
	}
	for _, tc := range cases {
		t.Run(tc.reason+" "+tc.err.Error(), func(t *testing.T) {
			g := NewWithT(t)
			status, reason := operatorStatus(tc.err)
			g.Expect(status).To(Equal(tc.status))
			g.Expect(reason).To(Equal(tc.reason))
		})
	}
}
