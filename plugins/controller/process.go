package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/contiv-ipam/agent/plugins/controller/api"
)

// errNeedsHealing marks an outcome after which a healing resync is due.
type outcome struct {
	err          error
	needsHealing bool
}

// process applies one event and records it.
func (l *eventLoop) process(q *queued) {
	l.seq++
	ev := q.ev
	rec := &EventRecord{
		SeqNum: l.seq, ProcessingStart: l.now(), IsFollowUp: q.isFollowUp, FollowUpTo: q.followUpTo,
		Name: ev.GetName(), Description: ev.String(), Method: ev.Method(), MethodName: ev.Method().String(),
	}
	l.status.begin(rec.SeqNum, rec.Description, rec.ProcessingStart)
	defer l.status.end()
	var out outcome
	txn := newTransaction(l.seq, l.isClosed)
	switch {
	case ev.Method() == api.DownstreamResync:
		out = l.downstreamResync(rec)
	case ev.Method().IsResync():
		out = l.resync(ev, rec, txn)
	default:
		out = l.update(ev, rec, txn)
	}
	// Queued before Done, so whoever waits for the event sees them queued.
	l.followUps = append(l.followUps, txn.finish()...)
	if out.err != nil && !api.IsFatal(out.err) && isAfterErrorHealing(ev) {
		out.err = api.NewFatalError(fmt.Errorf("healing resync failed: %w", out.err))
	}
	l.verify(rec)
	rec.ProcessingEnd = l.now()
	if out.err != nil {
		rec.Error = out.err.Error()
	}
	l.finish(q, rec, out)
}

// finish records the event, completes it and reacts to its outcome.
func (l *eventLoop) finish(q *queued, rec *EventRecord, out outcome) {
	if l.cfg.RecordEventHistory {
		l.history.add(*rec, rec.ProcessingEnd)
	}
	l.obs.processed(rec, out.err)
	logEvent(l, rec, out.err)
	// A fatal error is recorded before the event is answered: whoever
	// learns of the failure from its event and then asks for a resync
	// must be refused, not told it was dispatched to a dead loop.
	if api.IsFatal(out.err) {
		l.setFatal(out.err)
	}
	q.ev.Done(out.err)
	if q.done != nil {
		q.done <- out.err
	}
	_, isShutdown := q.ev.(*api.Shutdown)
	switch {
	case api.IsFatal(out.err), isShutdown:
	case out.needsHealing:
		l.scheduleHealing()
	}
	if _, ok := q.ev.(*api.DBResync); ok && !l.started && l.fatalErr == nil {
		l.started = true
		l.status.setStarted()
		l.obs.stateChanged(true, nil)
	}
}

func logEvent(l *eventLoop, rec *EventRecord, err error) {
	took := rec.ProcessingEnd.Sub(rec.ProcessingStart)
	if err != nil {
		l.log.Warn("event failed", "seq", rec.SeqNum, "event", rec.Description, "took", took, "error", err)
		return
	}
	l.log.Debug("event processed", "seq", rec.SeqNum, "event", rec.Description, "took", took, "txn-ops", len(rec.Txn))
}

// scheduleHealing arms one after-error healing resync.
func (l *eventLoop) scheduleHealing() {
	l.healing.Stop()
	l.healing.Reset(l.cfg.DelayAfterErrorHealing)
	l.log.Info("healing resync scheduled", "in", l.cfg.DelayAfterErrorHealing)
}

func isAfterErrorHealing(ev api.Event) bool {
	h, ok := ev.(*api.HealingResync)
	return ok && h.Type == api.AfterError
}

// resync rebuilds the desired configuration from every handler.
func (l *eventLoop) resync(ev api.Event, rec *EventRecord, txn *transaction) outcome {
	if db, ok := ev.(*api.DBResync); ok {
		l.kubeState = db.KubeState.Clone()
	}
	if ev.Method() == api.FullResync || ev.Method() == api.UpstreamResync {
		l.healing.Stop() // this resync heals whatever was pending
	}
	l.resyncCount++
	var errs []error
	for _, h := range l.handlers {
		if !h.HandlesEvent(ev) {
			continue
		}
		err := callResync(h, ev, l.kubeState, l.resyncCount, txn)
		rec.Handlers = append(rec.Handlers, handlerRecord(h, "", err, false))
		if err == nil {
			continue
		}
		if api.IsFatal(err) || api.IsAbort(err) {
			return outcome{err: fmt.Errorf("handler %s: %w", h, err)}
		}
		errs = append(errs, fmt.Errorf("handler %s: %w", h, err))
	}
	rec.Txn = txn.ops()
	if err := l.commit(Commit{Resync: true, Values: txn.values}, rec, false); err != nil {
		errs = append(errs, err)
	} else {
		l.desired = nonNil(txn.values)
	}
	err := errors.Join(errs...)
	return outcome{err: err, needsHealing: err != nil}
}

// downstreamResync re-applies the desired configuration; no handler runs.
func (l *eventLoop) downstreamResync(rec *EventRecord) outcome {
	err := l.commit(Commit{Resync: true, Values: maps.Clone(l.desired)}, rec, false)
	return outcome{err: err, needsHealing: err != nil}
}

// update applies one change through the handlers that want it.
func (l *eventLoop) update(ev api.Event, rec *EventRecord, txn *transaction) outcome {
	txnType, dir := api.BestEffort, api.Forward
	if ue, ok := ev.(api.UpdateEvent); ok {
		txnType, dir = ue.TransactionType(), ue.Direction()
	}
	if ksc, ok := ev.(*api.KubeStateChange); ok {
		l.kubeState.Apply(ksc.Resource, ksc.Key, ksc.NewValue)
	}
	handlers := l.handlers
	if dir == api.Reverse {
		handlers = slices.Clone(handlers)
		slices.Reverse(handlers)
	}
	var ran []api.EventHandler
	var errs []error
	for _, h := range handlers {
		if !h.HandlesEvent(ev) {
			continue
		}
		change, err := callUpdate(h, ev, txn)
		rec.Handlers = append(rec.Handlers, handlerRecord(h, change, err, false))
		if err == nil {
			ran = append(ran, h)
			continue
		}
		err = fmt.Errorf("handler %s: %w", h, err)
		if api.IsFatal(err) {
			return outcome{err: err}
		}
		if api.IsAbort(err) || txnType == api.RevertOnFailure {
			return l.revertAll(ev, ran, rec, txnType, err)
		}
		errs = append(errs, err)
	}
	rec.Txn = txn.ops()
	if len(txn.values) > 0 {
		if err := l.commit(Commit{Values: txn.values, Revert: txnType == api.RevertOnFailure}, rec, true); err != nil {
			if txnType == api.RevertOnFailure {
				return l.revertAll(ev, ran, rec, txnType, err)
			}
			errs = append(errs, err)
		}
		l.applyDesired(txn.values)
	}
	err := errors.Join(errs...)
	return outcome{err: err, needsHealing: err != nil && txnType == api.BestEffort}
}

// revertAll undoes the handlers that ran, in reverse order; nothing of the
// event is committed. A failed Revert needs healing; an abort does not.
func (l *eventLoop) revertAll(ev api.Event, ran []api.EventHandler, rec *EventRecord, txnType api.UpdateTransactionType, cause error) outcome {
	out := outcome{err: cause}
	if txnType != api.RevertOnFailure {
		return outcome{err: cause, needsHealing: !api.IsAbort(cause) && txnType == api.BestEffort}
	}
	for i := len(ran) - 1; i >= 0; i-- {
		err := callRevert(ran[i], ev)
		rec.Handlers = append(rec.Handlers, handlerRecord(ran[i], "", err, true))
		if err != nil {
			out.err = errors.Join(out.err, fmt.Errorf("revert %s: %w", ran[i], err))
			out.needsHealing = true
		}
	}
	return out
}

// commit hands c to the southbound, retrying update commits as configured.
// A retry waits on a timer that Close interrupts: then the commit gives up
// with its last error and ErrClosedController.
func (l *eventLoop) commit(c Commit, rec *EventRecord, retry bool) error {
	c.SeqNum, c.Event = rec.SeqNum, rec.Name
	attempts, delay := 1, l.cfg.DelayRetry
	if retry && l.cfg.EnableRetry {
		attempts += l.cfg.MaxRetryAttempts
	}
	err := callCommit(l.sb, c)
	for i := 1; err != nil; i++ {
		l.log.Warn("commit failed", "seq", c.SeqNum, "attempt", i, "of", attempts, "error", err)
		if i == attempts {
			err = fmt.Errorf("commit: %w", err)
			break
		}
		if !l.waitRetry(delay) {
			err = fmt.Errorf("commit: %w; retry %d of %d abandoned: %w", err, i, attempts-1, api.ErrClosedController)
			break
		}
		if l.cfg.EnableExpBackoffRetry {
			delay *= 2
		}
		err = callCommit(l.sb, c)
	}
	if err != nil {
		rec.TxnError = err.Error()
	}
	return err
}

// waitRetry waits d before a commit retry; it returns false at once when
// Close has begun.
func (l *eventLoop) waitRetry(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-l.closing:
		return false
	}
}

// applyDesired patches the desired configuration with update values.
func (l *eventLoop) applyDesired(values map[string]proto.Message) {
	for k, v := range values {
		if v == nil {
			delete(l.desired, k)
		} else {
			l.desired[k] = v
		}
	}
}

// verify compares the southbound with the desired configuration.
func (l *eventLoop) verify(rec *EventRecord) {
	if !l.cfg.EnableVerification {
		return
	}
	got := l.sb.Dump()
	if diff := diffConfig(l.desired, got); diff != "" {
		rec.VerificationError = diff
		l.log.Error("southbound differs from the desired configuration", "seq", rec.SeqNum, "diff", diff)
	}
}

// diffConfig names the first few keys that differ.
func diffConfig(want, got map[string]proto.Message) string {
	var diffs []string
	for k, w := range want {
		if g, ok := got[k]; !ok || !proto.Equal(w, g) {
			diffs = append(diffs, k)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, k)
		}
	}
	if len(diffs) == 0 {
		return ""
	}
	slices.Sort(diffs)
	if len(diffs) > 10 {
		diffs = append(diffs[:10], fmt.Sprintf("... %d more", len(diffs)-10))
	}
	return fmt.Sprintf("keys differ: %v", diffs)
}

func nonNil(values map[string]proto.Message) map[string]proto.Message {
	out := make(map[string]proto.Message, len(values))
	for k, v := range values {
		if v != nil {
			out[k] = v
		}
	}
	return out
}

func handlerRecord(h api.EventHandler, change string, err error, revert bool) HandlerRecord {
	r := HandlerRecord{Handler: h.String(), Change: change, Revert: revert}
	if err != nil {
		r.ErrorStr = err.Error()
	}
	return r
}

// The call helpers turn a handler panic into a fatal error: the loop must
// not die silently, and state after a panic cannot be trusted.
func callResync(h api.EventHandler, ev api.Event, ks api.KubeStateData, n int, txn api.ResyncOperations) (err error) {
	defer recoverFatal(h, &err)
	return h.Resync(ev, ks, n, txn)
}

func callUpdate(h api.EventHandler, ev api.Event, txn api.UpdateOperations) (change string, err error) {
	defer recoverFatal(h, &err)
	return h.Update(ev, txn)
}

func callRevert(h api.EventHandler, ev api.Event) (err error) {
	defer recoverFatal(h, &err)
	return h.Revert(ev)
}

func callCommit(sb Southbound, c Commit) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = api.NewFatalError(fmt.Errorf("southbound panicked: %v", r))
		}
	}()
	return sb.Commit(context.Background(), c)
}

func recoverFatal(h api.EventHandler, err *error) {
	if r := recover(); r != nil {
		*err = api.NewFatalError(fmt.Errorf("handler %s panicked: %v", h, r))
	}
}
