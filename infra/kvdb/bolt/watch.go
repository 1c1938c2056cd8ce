package bolt

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/contiv-ipam/agent/infra/kvdb"
)

// hub fans committed changes out to in-process watchers and keeps a
// bounded history so that a watch can start at a recent past revision.
// publish never blocks: each watcher has a buffered channel, and a watcher
// whose buffer is full is dropped (its channel closed) so that it re-lists.
type hub struct {
	log        *slog.Logger
	maxHistory int
	bufSize    int

	mu       sync.Mutex
	history  []kvdb.WatchEvent // events in revision order
	complete int64             // every event with revision >= complete is in history
	watchers map[*watcher]struct{}
	closed   bool
}

// watcher is one Watch call.
type watcher struct {
	prefix  string
	fromRev int64
	ch      chan kvdb.WatchEvent
	stop    func() bool // unregisters the context.AfterFunc
}

// newHub starts a hub for a database at revision rev.
func newHub(rev int64, maxHistory, bufSize int, log *slog.Logger) *hub {
	return &hub{
		log:        log,
		maxHistory: maxHistory,
		bufSize:    bufSize,
		complete:   rev + 1,
		watchers:   map[*watcher]struct{}{},
	}
}

// watch registers a watcher of prefix from fromRev (0: from now). The
// history it can still replay is sent first, then live events follow.
func (h *hub) watch(ctx context.Context, prefix string, fromRev int64) (<-chan kvdb.WatchEvent, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, fmt.Errorf("bolt watch %q: %w", prefix, kvdb.ErrClosed)
	}
	if fromRev > 0 && fromRev < h.complete {
		return nil, fmt.Errorf("bolt watch %q from revision %d: history starts at %d: %w",
			prefix, fromRev, h.complete, kvdb.ErrCompacted)
	}
	var replay []kvdb.WatchEvent
	if fromRev > 0 {
		for _, ev := range h.history {
			if ev.Revision >= fromRev && strings.HasPrefix(ev.Key, prefix) {
				replay = append(replay, ev)
			}
		}
	}
	w := &watcher{prefix: prefix, fromRev: fromRev, ch: make(chan kvdb.WatchEvent, h.bufSize+len(replay))}
	for _, ev := range replay {
		w.ch <- ev
	}
	h.watchers[w] = struct{}{}
	w.stop = context.AfterFunc(ctx, func() { h.drop(w) })
	return w.ch, nil
}

// publish records the events of one commit and sends them to the watchers.
func (h *hub) publish(events []kvdb.WatchEvent) {
	if len(events) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.remember(events)
	for w := range h.watchers {
		for _, ev := range events {
			if ev.Revision < w.fromRev || !strings.HasPrefix(ev.Key, w.prefix) {
				continue
			}
			select {
			case w.ch <- ev:
			default:
				h.log.Warn("watcher fell behind; closing its channel so that it re-lists",
					"prefix", w.prefix, "buffer", cap(w.ch))
				h.dropLocked(w)
			}
			if _, live := h.watchers[w]; !live {
				break
			}
		}
	}
}

// remember appends events to the history. Once it holds more than twice
// maxHistory events it is trimmed to the newest maxHistory (amortising the
// copy), never keeping only part of one revision.
func (h *hub) remember(events []kvdb.WatchEvent) {
	h.history = append(h.history, events...)
	if len(h.history) <= 2*h.maxHistory {
		return
	}
	excess := len(h.history) - h.maxHistory
	cut := h.history[excess-1].Revision
	for excess < len(h.history) && h.history[excess].Revision == cut {
		excess++
	}
	h.complete = cut + 1
	h.history = append(h.history[:0:0], h.history[excess:]...)
}

// drop closes w's channel once.
func (h *hub) drop(w *watcher) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropLocked(w)
}

func (h *hub) dropLocked(w *watcher) {
	if _, ok := h.watchers[w]; !ok {
		return
	}
	delete(h.watchers, w)
	w.stop()
	close(w.ch)
}

// close ends every watch; later watches fail with ErrClosed.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for w := range h.watchers {
		h.dropLocked(w)
	}
}
