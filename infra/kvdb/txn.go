package kvdb

import "context"

// CmpKind is what a Cmp checks.
type CmpKind int

// Compare kinds.
const (
	// CmpValue holds when the key exists and its value equals Cmp.Value
	// (compared bytewise; a nil Value matches an existing empty value).
	CmpValue CmpKind = iota + 1
	// CmpAbsent holds when the key does not exist.
	CmpAbsent
	// CmpModRevision holds when the key's mod revision equals Cmp.Revision;
	// a missing key has mod revision 0.
	CmpModRevision
)

// Cmp is a condition on one key, evaluated inside a Txn.
type Cmp struct {
	Kind     CmpKind
	Key      string
	Value    []byte // for CmpValue
	Revision int64  // for CmpModRevision
}

// IfValue holds when key exists with exactly value.
func IfValue(key string, value []byte) Cmp { return Cmp{Kind: CmpValue, Key: key, Value: value} }

// IfAbsent holds when key does not exist.
func IfAbsent(key string) Cmp { return Cmp{Kind: CmpAbsent, Key: key} }

// IfModRevision holds when key's mod revision is rev (0: the key is absent).
func IfModRevision(key string, rev int64) Cmp {
	return Cmp{Kind: CmpModRevision, Key: key, Revision: rev}
}

// OpKind is what an Op does.
type OpKind int

// Op kinds.
const (
	// OpPut stores Op.Value under Op.Key.
	OpPut OpKind = iota + 1
	// OpDelete removes Op.Key (a missing key is not an error).
	OpDelete
)

// Op is one write inside a Txn.
type Op struct {
	Kind  OpKind
	Key   string
	Value []byte // for OpPut
}

// PutOp stores value under key.
func PutOp(key string, value []byte) Op { return Op{Kind: OpPut, Key: key, Value: value} }

// DeleteOp removes key.
func DeleteOp(key string) Op { return Op{Kind: OpDelete, Key: key} }

// PutIfAbsent stores value under key only if key does not exist; created
// tells whether it did.
func PutIfAbsent(ctx context.Context, b Broker, key string, value []byte) (created bool, err error) {
	return b.Txn(ctx, []Cmp{IfAbsent(key)}, []Op{PutOp(key, value)})
}

// CompareAndSwap replaces key's value with newValue only if it currently is
// oldValue; swapped tells whether it was. A missing key is never swapped.
func CompareAndSwap(ctx context.Context, b Broker, key string, oldValue, newValue []byte) (swapped bool, err error) {
	return b.Txn(ctx, []Cmp{IfValue(key, oldValue)}, []Op{PutOp(key, newValue)})
}

// CompareAndDelete deletes key only if its value currently is oldValue;
// deleted tells whether it was.
func CompareAndDelete(ctx context.Context, b Broker, key string, oldValue []byte) (deleted bool, err error) {
	return b.Txn(ctx, []Cmp{IfValue(key, oldValue)}, []Op{DeleteOp(key)})
}
