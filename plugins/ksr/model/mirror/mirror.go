// Package mirror is the marker by which contiv-ksr tells the agents how
// complete and how fresh its mirror of the Kubernetes state is. The
// agents count a pod as gone only while the marker is fresh: without it
// (contiv-ksr not running, a store emptied or restored from an old
// snapshot) nothing is released because a pod is missing.
//
// One key, under codec.KSRPrefix, with one writer (contiv-ksr's leader,
// in a transaction fenced by its leadership): Key holds a Marker (JSON,
// carried by the watchers as a generic struct), rewritten every Interval
// once the leader's mirror is complete, that is after its resync and
// the changes the informers delivered before the heartbeat are written.
package mirror

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

const (
	// KeyPrefix is the prefix of the marker's key, relative to
	// codec.KSRPrefix; Keyword names it in the controller's state.
	KeyPrefix = "contiv/mirror/"
	Keyword   = "mirror"
	// Key is the marker's key, relative to codec.KSRPrefix.
	Key = KeyPrefix + "status"
)

// Marker is what contiv-ksr's leader says of its mirror.
type Marker struct {
	// Leader is the identity of the replica that wrote it.
	Leader string `json:"leader"`
	// ResourceVersion is the API server's resource version up to which
	// the pods are listed and mirrored.
	ResourceVersion string `json:"resourceVersion"`
	// Pods is the number of pods the mirror holds.
	Pods int `json:"pods"`
	// Heartbeat is when the leader wrote the marker (its clock); it
	// only moves forward while one mirror is kept.
	Heartbeat time.Time `json:"heartbeat"`
	// Interval is the period of the heartbeat ("10s").
	Interval string `json:"interval"`
}

// Period is Interval as a duration.
func (m Marker) Period() time.Duration {
	d, _ := time.ParseDuration(m.Interval)
	return d
}

// Encode is the stored value of m.
func (m Marker) Encode() []byte {
	b, _ := json.Marshal(m)
	return b
}

// Parse decodes a stored marker; an error names the field that is
// missing or wrong.
func Parse(b []byte) (Marker, error) {
	var m Marker
	if err := json.Unmarshal(b, &m); err != nil {
		return Marker{}, fmt.Errorf("mirror marker %.80q: %w", b, err)
	}
	return m, m.check()
}

func (m Marker) check() error {
	d, err := time.ParseDuration(m.Interval)
	switch {
	case m.Heartbeat.IsZero():
		return errors.New("mirror marker: heartbeat is missing")
	case err != nil || d <= 0:
		return fmt.Errorf("mirror marker: interval %q: want a duration > 0", m.Interval)
	case m.Pods < 0:
		return fmt.Errorf("mirror marker: pods %d: want >= 0", m.Pods)
	}
	return nil
}

// FromStruct decodes the marker as the watchers carry it.
func FromStruct(v *structpb.Struct) (Marker, error) {
	b, err := protojson.Marshal(v)
	if err != nil {
		return Marker{}, fmt.Errorf("mirror marker: %w", err)
	}
	return Parse(b)
}
