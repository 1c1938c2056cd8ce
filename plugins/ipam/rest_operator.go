package ipam

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/contiv-ipam/agent/engine/ipalloc"
	"github.com/contiv-ipam/agent/infra/rest"
	"github.com/contiv-ipam/agent/plugins/ipam/addressing"
	"github.com/contiv-ipam/agent/plugins/ipam/keeper"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// The operator calls: an operator (or a tool of theirs) allocates,
// reserves, confirms and releases addresses of this node's pod subnets
// by hand, through the Cilium-style calls (cilium.go, timers.go). They
// change state, so they are served only by a REST server that
// authenticates every client (rest.Authenticates): otherwise 403, naming
// the http.conf keys that turn authentication on. Each is POST only, with
// a JSON body decoded strictly (rest_body.go), and is logged at Info with
// its arguments, its outcome and who asked (rest.ClientOf), before the
// reply is sent.
//
// A call is refused, in this order: 403 without client authentication,
// 415 unless Content-Type is application/json (a browser's cross-site
// form post needs no CORS preflight, a JSON one does), 413 over 64 KiB,
// 400 for a bad body, 503 before the first resync (and, for allocate and
// reserve, once the node ID is lost), then by IPAM (operatorStatus). A
// call answers once its change is durable. release by ip releases the
// whole allocation holding the address, whoever holds it (a pod's too),
// or with pod only if that pod holds it (the check and the release are
// one step of the keeper: 409 moved when another pod or owner holds it);
// release by owner every allocation of the owner (ReleaseIPString).
const (
	OperatorAllocatePath = "/contiv/v1/ipam/operator/allocate"
	OperatorReservePath  = "/contiv/v1/ipam/operator/reserve"
	OperatorConfirmPath  = "/contiv/v1/ipam/operator/confirm"
	OperatorReleasePath  = "/contiv/v1/ipam/operator/release"
	// OperatorRestoreConflictPath and OperatorDiscardConflictPath
	// resolve a record moved aside (GET /contiv/v1/ipam/conflicts).
	OperatorRestoreConflictPath = "/contiv/v1/ipam/operator/conflicts/restore"
	OperatorDiscardConflictPath = "/contiv/v1/ipam/operator/conflicts/discard"
)

// OperatorConflict is the reply of the conflict calls.
type OperatorConflict struct {
	Conflict  string `json:"conflict"`
	Restored  bool   `json:"restored,omitempty"`
	Discarded bool   `json:"discarded,omitempty"`
	Detail    string `json:"detail,omitempty"`
}

// OperatorAddress is one address of an operator reply (Cilium's
// AllocationResult): the address, its pod subnet, the pod gateway.
type OperatorAddress struct {
	IP        string   `json:"ip"`
	CIDRs     []string `json:"cidrs"`
	GatewayIP string   `json:"gatewayIP"`
}

// OperatorAllocation is the reply of POST .../operator/allocate.
type OperatorAllocation struct {
	Owner string `json:"owner"`
	OperatorAddress
}

// OperatorReservation is the reply of POST .../operator/reserve: the
// addresses (one, or one per family of the node for a reservation of the
// next free addresses without a family) form one allocation with one
// expiration timer. Unless confirmed (ExpirationUUID, with any of the
// addresses) before Deadline, the allocation is released then.
type OperatorReservation struct {
	Owner          string            `json:"owner"`
	Addresses      []OperatorAddress `json:"addresses"`
	ExpirationUUID string            `json:"expirationUUID"`
	// Deadline is RFC 3339 (UTC); absent when the reservation was
	// confirmed or released before the reply was made.
	Deadline string `json:"deadline,omitempty"`
}

// OperatorConfirmation is the reply of POST .../operator/confirm.
type OperatorConfirmation struct {
	IP             string `json:"ip"`
	ExpirationUUID string `json:"expirationUUID"`
	Confirmed      bool   `json:"confirmed"`
}

// OperatorRelease is the reply of POST .../operator/release: the address
// or the owner the call named, the pod of a conditional release, and for
// a release by address every address of the allocation it released.
type OperatorRelease struct {
	IP       string   `json:"ip,omitempty"`
	Owner    string   `json:"owner,omitempty"`
	Pod      string   `json:"pod,omitempty"`
	IPs      []string `json:"ips,omitempty"`
	Released bool     `json:"released"`
}

// OperatorError is the body of every refused operator call: the message
// (as every error of the REST server) and a reason a client can branch
// on (see operatorStatus).
type OperatorError struct {
	Error  string `json:"error"`
	Reason string `json:"reason"`
}

// operatorOp is one operator call.
type operatorOp struct {
	name, path, description string
	fields                  opField                        // accepted in the body
	check                   func(r *operatorRequest) error // the rules across fields
	allocates               bool                           // refused while the node ID is lost, and with an external IPAM
	run                     func(p *Plugin, r *operatorRequest) (any, error)
}

// operatorOps are the operator calls.
var operatorOps = []operatorOp{
	{
		name: "allocate", path: OperatorAllocatePath, fields: fieldIP | fieldOwner, allocates: true,
		description: "operator: allocate the address ip to owner (body {ip, owner}); needs client authentication",
		check:       requireFields(fieldIP | fieldOwner),
		run:         (*Plugin).operatorAllocate,
	},
	{
		name: "reserve", path: OperatorReservePath, fields: fieldIP | fieldFamily | fieldOwner | fieldTimeout, allocates: true,
		description: "operator: reserve ip, or the next free address of family, for owner until timeout unless confirmed (body {ip | family, owner, timeout}); needs client authentication",
		check:       checkReserve,
		run:         (*Plugin).operatorReserve,
	},
	{
		name: "confirm", path: OperatorConfirmPath, fields: fieldIP | fieldUUID,
		description: "operator: confirm the reservation uuid of the allocation holding ip (body {ip, uuid}); needs client authentication",
		check:       requireFields(fieldIP | fieldUUID),
		run:         (*Plugin).operatorConfirm,
	},
	{
		name: "release", path: OperatorReleasePath, fields: fieldIP | fieldOwner | fieldPod | fieldUID,
		description: "operator: release the allocation holding ip (only if pod holds it, when given), or every allocation of owner (body {ip[, pod]} or {owner}); a CNI attachment's only with ?force=true; needs client authentication",
		check:       checkRelease,
		run:         (*Plugin).operatorRelease,
	},
	{
		name: "restore-conflict", path: OperatorRestoreConflictPath, fields: fieldConflict,
		description: "operator: put a record moved aside back, if its addresses are free and in a pool of this node (body {conflict}); needs client authentication",
		check:       requireFields(fieldConflict),
		run:         (*Plugin).operatorRestoreConflict,
	},
	{
		name: "discard-conflict", path: OperatorDiscardConflictPath, fields: fieldConflict,
		description: "operator: delete a record moved aside (body {conflict}); needs client authentication",
		check:       requireFields(fieldConflict),
		run:         (*Plugin).operatorDiscardConflict,
	},
}

func (p *Plugin) operatorRestoreConflict(r *operatorRequest) (any, error) {
	what, err := p.RestoreConflict(r.conflict)
	if err != nil {
		return nil, err
	}
	return OperatorConflict{Conflict: r.conflict, Restored: true, Detail: what}, nil
}

func (p *Plugin) operatorDiscardConflict(r *operatorRequest) (any, error) {
	if err := p.DiscardConflict(r.conflict); err != nil {
		return nil, err
	}
	return OperatorConflict{Conflict: r.conflict, Discarded: true}, nil
}

// registerOperatorHandlers registers the operator calls, whether or not
// the server authenticates its clients (they answer 403 then).
func (p *Plugin) registerOperatorHandlers() {
	for i := range operatorOps {
		op := &operatorOps[i]
		rest.RegisterDescribed(p.HTTP, op.path, op.description, p.operatorHandler(op), http.MethodPost)
	}
}

// requireFields is the check of a call whose fields m are all required.
func requireFields(m opField) func(r *operatorRequest) error {
	return func(r *operatorRequest) error {
		for _, f := range opFields {
			if m&f.f != 0 && !r.has(f.f) {
				return &bodyError{field: f.name, msg: "missing"}
			}
		}
		return nil
	}
}

// checkReserve: owner and timeout are required; ip and family exclude
// each other.
func checkReserve(r *operatorRequest) error {
	if err := requireFields(fieldOwner | fieldTimeout)(r); err != nil {
		return err
	}
	if r.has(fieldIP) && r.has(fieldFamily) {
		return &bodyError{field: "family", msg: "given with \"ip\": give the address, or the family of the next free one"}
	}
	return nil
}

// checkRelease: exactly one of ip and owner; pod only with ip, and a
// pod's name.
func checkRelease(r *operatorRequest) error {
	switch {
	case r.has(fieldIP) == r.has(fieldOwner):
		return &bodyError{msg: "want exactly one of \"ip\" (release the allocation holding it) and \"owner\" (release its allocations)"}
	case !r.has(fieldPod) && r.has(fieldUID):
		return &bodyError{field: "uid", msg: "given without \"pod\": the UID is a condition on the pod"}
	case !r.has(fieldPod):
		return nil
	case r.has(fieldOwner):
		return &bodyError{field: "pod", msg: "given with \"owner\": the pod is a condition of a release by \"ip\""}
	}
	if _, err := parsePod(r.pod); err != nil {
		return &bodyError{field: "pod", msg: quote(r.pod) + " " + err.Error()}
	}
	return nil
}

// maxPodName bounds the pod of a conditional release: a namespace (63
// bytes), "/", a name (253).
const maxPodName = 63 + 1 + 253

// parsePod parses the pod of a conditional release, "namespace/name", or
// says what is wrong with it.
func parsePod(s string) (podmodel.ID, error) {
	ns, name, ok := strings.Cut(s, "/")
	switch {
	case !ok || ns == "" || name == "" || strings.Contains(name, "/"):
		return podmodel.ID{}, errors.New(`is not a pod: want "namespace/name"`)
	case len(s) > maxPodName:
		return podmodel.ID{}, fmt.Errorf("is longer than %d bytes", maxPodName)
	case !utf8.ValidString(s):
		return podmodel.ID{}, errors.New("is not UTF-8")
	case strings.IndexFunc(s, func(c rune) bool { return !unicode.IsPrint(c) || unicode.IsSpace(c) }) >= 0:
		return podmodel.ID{}, errors.New("has a space or a character that is not printable")
	}
	return podmodel.ID{Namespace: ns, Name: name}, nil
}

func (p *Plugin) operatorAllocate(r *operatorRequest) (any, error) {
	res, err := p.allocateIP(addressing.ToIP(r.ip), r.owner, 0)
	if err != nil {
		return nil, err
	}
	return OperatorAllocation{Owner: r.owner, OperatorAddress: operatorAddress(res)}, nil
}

func (p *Plugin) operatorReserve(r *operatorRequest) (any, error) {
	var rs []*AllocationResult
	if r.has(fieldIP) {
		res, err := p.allocateIP(addressing.ToIP(r.ip), r.owner, r.timeout)
		if err != nil {
			return nil, err
		}
		rs = append(rs, res)
	} else {
		v4, v6, err := p.reserveNext(string(r.family), r.owner, r.timeout)
		if err != nil {
			return nil, err
		}
		for _, res := range []*AllocationResult{v4, v6} {
			if res != nil {
				rs = append(rs, res)
			}
		}
	}
	out := OperatorReservation{Owner: r.owner}
	for _, res := range rs {
		out.Addresses = append(out.Addresses, operatorAddress(res))
	}
	if len(rs) == 0 {
		return out, nil
	}
	out.ExpirationUUID = rs[0].ExpirationUUID
	if a, ok := addressing.ToAddr(rs[0].IP); ok {
		if dl, ok := p.keeper.ReservationDeadline(a, out.ExpirationUUID); ok {
			out.Deadline = dl.UTC().Format(time.RFC3339Nano)
		}
	}
	return out, nil
}

func (p *Plugin) operatorConfirm(r *operatorRequest) (any, error) {
	if err := p.StopExpirationTimer(addressing.ToIP(r.ip), r.uuid); err != nil {
		return nil, err
	}
	return OperatorConfirmation{IP: r.ip.String(), ExpirationUUID: r.uuid, Confirmed: true}, nil
}

func (p *Plugin) operatorRelease(r *operatorRequest) (any, error) {
	if r.has(fieldIP) {
		var holder *keeper.Holder
		if r.has(fieldPod) {
			id, _ := parsePod(r.pod) // checked by checkRelease
			holder = &keeper.Holder{Pod: id, UID: r.uid}
		}
		as, err := p.keeper.ReleaseAddr(r.ip, r.force, holder)
		if err != nil {
			return nil, err
		}
		out := OperatorRelease{IP: r.ip.String(), Pod: r.pod, Released: true}
		for _, a := range as.List() {
			out.IPs = append(out.IPs, a.String())
		}
		return out, nil
	}
	if err := p.keeper.ReleaseOwner(r.owner, r.force); err != nil {
		return nil, err
	}
	return OperatorRelease{Owner: r.owner, Released: true}, nil
}

// operatorAddress is the reply form of res.
func operatorAddress(res *AllocationResult) OperatorAddress {
	return OperatorAddress{IP: res.IP.String(), CIDRs: res.CIDRs, GatewayIP: res.GatewayIP}
}

// refusal is an operator call refused before it reaches IPAM, with its
// status and reason.
type refusal struct {
	status int
	reason string
	err    error
}

func (e *refusal) Error() string { return e.err.Error() }
func (e *refusal) Unwrap() error { return e.err }

// errNoClientAuth refuses an operator call on a server that does not
// authenticate its clients.
var errNoClientAuth = fmt.Errorf("the operator calls change IPAM state and need client authentication; "+
	"set %s in http.conf", rest.ClientAuthKeys)

// errNotJSON refuses a body that is not declared as JSON (a browser's
// form post, which needs no CORS preflight).
var errNotJSON = errors.New("want Content-Type: application/json")

// errExternalIPAM refuses an allocation on a node whose pod addresses
// come from an external IPAM.
var errExternalIPAM = errors.New("pod addresses come from an external IPAM (ipamConfig.useExternalIPAM): nothing is allocated here")

// operatorHandler serves one operator call.
func (p *Plugin) operatorHandler(op *operatorOp) rest.HandlerProvider {
	return func(f *rest.Formatter) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var req operatorRequest
			reply, err := p.serveOperator(op, &req, w, r)
			if err != nil {
				status, reason := operatorStatus(err)
				p.logOperator(op, &req, rest.ClientOf(r), status, nil, err)
				f.JSON(w, status, OperatorError{Error: err.Error(), Reason: reason})
				return
			}
			// Logged before the reply: a client that has it finds it in the log.
			p.logOperator(op, &req, rest.ClientOf(r), http.StatusOK, reply, nil)
			f.JSON(w, http.StatusOK, reply)
		}
	}
}

// serveOperator decodes one call into req, runs it and returns its reply.
func (p *Plugin) serveOperator(op *operatorOp, req *operatorRequest, w http.ResponseWriter, r *http.Request) (any, error) {
	if !rest.Authenticates(p.HTTP) {
		return nil, &refusal{http.StatusForbidden, "forbidden", errNoClientAuth}
	}
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		return nil, &refusal{http.StatusUnsupportedMediaType, "unsupported-media", fmt.Errorf("Content-Type %s: %w", quote(ct), errNotJSON)}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxOperatorBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, &refusal{http.StatusRequestEntityTooLarge, "too-large", fmt.Errorf("body: longer than %d bytes", maxOperatorBody)}
	case err != nil:
		return nil, &refusal{http.StatusBadRequest, "bad-request", fmt.Errorf("body: reading: %w", err)}
	}
	if *req, err = decodeOperatorBody(body, op.name, op.fields); err != nil {
		return nil, err
	}
	if op.name == "release" {
		if req.force, err = boolQuery(r.URL.Query(), "force", "release"); err != nil {
			return nil, &refusal{http.StatusBadRequest, "bad-request", err}
		}
	}
	if err := op.check(req); err != nil {
		return nil, err
	}
	st := p.st.Load()
	if st == nil {
		return nil, p.notReady()
	}
	if op.allocates {
		if err := p.checkNodeID(); err != nil {
			return nil, err
		}
		if st.Cfg.UseExternalIPAM {
			return nil, errExternalIPAM
		}
	}
	return op.run(p, req)
}

// operatorStatus maps the error of an operator call to its status and
// reason:
//
//	403 forbidden            the server does not authenticate its clients
//	415 unsupported-media    Content-Type is not application/json
//	413 too-large            body over 64 KiB
//	400 bad-request          not one JSON object of the call's fields, a
//	                         field given twice or missing, a bad value
//	404 not-allocated        nobody holds the address, the owner holds none
//	409 moved                release by ip with pod: another pod or owner
//	                         holds the address
//	409 taken                the address is held
//	409 live-attachment      release without ?force=true of a CNI
//	                         attachment's address or owner
//	409 excluded             the address is excluded (BlacklistIP,
//	                         excludeIPs, a local route)
//	409 reservation-mismatch the allocation has no reservation of that uuid
//	409 timer-exists         the allocation has an expiration timer already
//	409 exhausted            no address of the family is free
//	409 external-ipam        the node's pod addresses come from an
//	                         external IPAM
//	404 no-such-conflict     no record is moved aside under that name
//	409 cannot-restore       the record moved aside cannot be placed:
//	                         an address is held, or outside the pools
//	422 family-disabled      the node has no pod subnet of that family
//	422 out-of-range         the address is not in this node's pod subnet
//	422 reserved             the address is the network address, the pod
//	                         gateway, the NAT loopback or the broadcast
//	503 not-ready            no resync yet, or IPAM is closing
//	503 node-id-lost         nodesync no longer holds the node ID the pod
//	                         subnet was cut with
//	500 internal             anything else (a store failure)
func operatorStatus(err error) (int, string) {
	var ref *refusal
	if errors.As(err, &ref) {
		return ref.status, ref.reason
	}
	if errors.Is(err, errBadBody) {
		return http.StatusBadRequest, "bad-request"
	}
	for _, m := range operatorErrors {
		for _, target := range m.errs {
			if errors.Is(err, target) {
				return m.status, m.reason
			}
		}
	}
	return http.StatusInternalServerError, "internal"
}

// operatorErrors map the errors of the calls, first match first.
var operatorErrors = []struct {
	errs   []error
	status int
	reason string
}{
	{[]error{keeper.ErrNotReady, keeper.ErrClosed}, http.StatusServiceUnavailable, "not-ready"},
	{[]error{ErrNodeIDLost}, http.StatusServiceUnavailable, "node-id-lost"},
	{[]error{errExternalIPAM, ErrExternalIPAM}, http.StatusConflict, "external-ipam"},
	{[]error{ErrNotAllocated, ipalloc.ErrNotAllocated}, http.StatusNotFound, "not-allocated"},
	{[]error{keeper.ErrMoved}, http.StatusConflict, "moved"},
	{[]error{ErrLiveAttachment}, http.StatusConflict, "live-attachment"},
	{[]error{ErrExcluded}, http.StatusConflict, "excluded"},
	{[]error{ipalloc.ErrTaken}, http.StatusConflict, "taken"},
	{[]error{ErrReservationMismatch}, http.StatusConflict, "reservation-mismatch"},
	{[]error{ErrTimerExists}, http.StatusConflict, "timer-exists"},
	{[]error{ipalloc.ErrPoolExhausted}, http.StatusConflict, "exhausted"},
	{[]error{ErrIPv4Disabled, ErrIPv6Disabled}, http.StatusUnprocessableEntity, "family-disabled"},
	{[]error{ipalloc.ErrOutOfRange}, http.StatusUnprocessableEntity, "out-of-range"},
	{[]error{ipalloc.ErrReserved}, http.StatusUnprocessableEntity, "reserved"},
	{[]error{ErrNoSuchConflict}, http.StatusNotFound, "no-such-conflict"},
	{[]error{ErrCannotRestore}, http.StatusConflict, "cannot-restore"},
}

// logOperator logs one operator call at Info (a refusal for want of
// client authentication at Warn): the call, its arguments, its status and
// reply or error, and who asked.
func (p *Plugin) logOperator(op *operatorOp, r *operatorRequest, who rest.Client, status int, reply any, err error) {
	attrs := []any{"op", op.name}
	attrs = append(attrs, r.args()...)
	attrs = append(attrs, "status", status)
	if err != nil {
		attrs = append(attrs, "error", err.Error())
	} else {
		res, _ := json.Marshal(reply) // the reply types always encode
		attrs = append(attrs, "result", string(res))
	}
	attrs = append(attrs, "user", who.User, "cert-cn", who.CertCN, "remote", who.Remote)
	switch {
	case status == http.StatusForbidden:
		p.Log.Warn("operator call refused: the REST server does not authenticate its clients", attrs...)
	case err != nil:
		p.Log.Info("operator call failed", attrs...)
	default:
		p.Log.Info("operator call", attrs...)
	}
}

// args are the log attributes of the fields present.
func (r *operatorRequest) args() []any {
	var out []any
	if r.has(fieldIP) {
		out = append(out, "ip", r.ip.String())
	}
	if r.has(fieldFamily) {
		out = append(out, "family", string(r.family))
	}
	if r.has(fieldOwner) {
		out = append(out, "owner", r.owner)
	}
	if r.has(fieldTimeout) {
		out = append(out, "timeout", r.timeout.String())
	}
	if r.has(fieldUUID) {
		out = append(out, "uuid", r.uuid)
	}
	if r.has(fieldConflict) {
		out = append(out, "conflict", r.conflict)
	}
	if r.has(fieldPod) {
		out = append(out, "pod", r.pod)
	}
	if r.has(fieldUID) {
		out = append(out, "uid", r.uid)
	}
	return out
}
