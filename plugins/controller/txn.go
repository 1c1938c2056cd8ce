package controller

import (
	"sort"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/contiv-ipam/agent/plugins/controller/api"
)

// transaction collects the handlers' changes for one event.
type transaction struct {
	values map[string]proto.Message // nil value = delete
}

var _ api.UpdateOperations = (*transaction)(nil)

func newTransaction() *transaction {
	return &transaction{values: map[string]proto.Message{}}
}

// Put sets key; a nil value deletes it.
func (t *transaction) Put(key string, value proto.Message) { t.values[key] = value }

// Get returns what this transaction put under key, or nil.
func (t *transaction) Get(key string) proto.Message { return t.values[key] }

// Delete removes key.
func (t *transaction) Delete(key string) { t.values[key] = nil }

// TxnOp is one operation of a recorded transaction.
type TxnOp struct {
	Key       string
	Operation string // "put" or "delete"
	Value     string `json:",omitempty"` // protojson of the value
}

// ops lists the operations sorted by key.
func (t *transaction) ops() []TxnOp {
	keys := make([]string, 0, len(t.values))
	for k := range t.values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]TxnOp, len(keys))
	for i, k := range keys {
		out[i] = TxnOp{Key: k, Operation: "delete"}
		if v := t.values[k]; v != nil {
			out[i].Operation = "put"
			out[i].Value = encodeValue(v)
		}
	}
	return out
}

// encodeValue is compact protojson, or the error text.
func encodeValue(v proto.Message) string {
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(v)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}
