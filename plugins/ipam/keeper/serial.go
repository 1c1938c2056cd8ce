package keeper

import (
	"context"
	"fmt"

	"github.com/contiv-ipam/agent/infra/kvdb"
)

// serialSubmitter gives a store without a write queue of its own (a
// kvdb.Broker that is not a kvdb.Submitter) the keeper's Submit: one
// goroutine runs the transactions in the order they were submitted, each
// alone. The agent's store (bolt) has its own queue; this is for other
// brokers, without grouping.
type serialSubmitter struct {
	db   kvdb.Broker
	jobs chan serialJob
}

type serialJob struct {
	ctx  context.Context
	ops  []kvdb.Op
	done func(bool, error)
}

var _ kvdb.Submitter = (*serialSubmitter)(nil)

func newSerialSubmitter(db kvdb.Broker) *serialSubmitter {
	s := &serialSubmitter{db: db, jobs: make(chan serialJob, maxInflight)}
	go s.run()
	return s
}

// Submit implements kvdb.Submitter (without cmps: the keeper uses none).
func (s *serialSubmitter) Submit(ctx context.Context, cmps []kvdb.Cmp, ops []kvdb.Op, done func(bool, error)) error {
	if len(cmps) > 0 {
		return fmt.Errorf("%w: serialSubmitter takes no compares", kvdb.ErrInvalidTxn)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("not applied: %w", err)
	}
	select {
	case s.jobs <- serialJob{ctx: ctx, ops: ops, done: done}:
		return nil
	default:
		return fmt.Errorf("%w: %d transactions queued", kvdb.ErrBusy, cap(s.jobs))
	}
}

// run stores the jobs in order; it never ends (the goroutine idles once
// the keeper is gone, like the store it wraps).
func (s *serialSubmitter) run() {
	for j := range s.jobs {
		ok, err := s.db.Txn(j.ctx, nil, j.ops)
		j.done(ok, err)
	}
}
