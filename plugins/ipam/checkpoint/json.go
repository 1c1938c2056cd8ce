package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// This file reads the JSON of a document strictly: every object is read
// key by key (names exact, case included, each once), every value must
// have its type (null is none of them), and nothing may follow the
// document. The decoders of each version (decode.go, v1.go) say which
// keys an object takes.

// maxQuoted bounds a value quoted in an error, in bytes.
const maxQuoted = 80

// member is one key of a JSON object and its raw value.
type member struct {
	key string
	raw json.RawMessage
}

// readObject reads raw, which must be one JSON object, into its members
// in document order; a key given twice is refused.
func readObject(raw []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	switch {
	case err != nil && err != io.EOF:
		return nil, fmt.Errorf("invalid JSON: %w", err)
	case err != nil || tok != json.Delim('{'):
		return nil, fmt.Errorf("want a JSON object, got %s", describe(raw, tok, err))
	}
	var out []member
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("invalid JSON: %w", err)
		}
		key, _ := tok.(string) // object keys are strings
		if seen[key] {
			return nil, fmt.Errorf("key %s given twice", quote(key))
		}
		seen[key] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("key %s: invalid JSON: %w", quote(key), err)
		}
		out = append(out, member{key, v})
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, fmt.Errorf("the JSON object is not closed: %s", describe(nil, nil, err))
	}
	if tok, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("data after the JSON object: %s", describe(nil, tok, err))
	}
	return out, nil
}

// readArray reads raw, which must be one JSON array, into its elements.
func readArray(raw []byte) ([]json.RawMessage, error) {
	if kind(raw) != '[' {
		return nil, fmt.Errorf("want a JSON array, got %s", cut(string(raw)))
	}
	var out []json.RawMessage
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	return out, nil
}

// readString reads a JSON string.
func readString(raw []byte) (string, error) {
	var s string
	if kind(raw) != '"' || json.Unmarshal(raw, &s) != nil {
		return "", fmt.Errorf("want a JSON string, got %s", cut(string(raw)))
	}
	return s, nil
}

// readUint reads a JSON number that is a non-negative integer of 64 bits.
func readUint(raw []byte) (uint64, error) {
	var n uint64
	if k := kind(raw); (k < '0' || k > '9') || json.Unmarshal(raw, &n) != nil {
		return 0, fmt.Errorf("want a non-negative integer, got %s", cut(string(raw)))
	}
	return n, nil
}

// readTime reads an RFC 3339 time, in UTC; a time whose year in UTC is
// outside 0..9999 is refused (JSON cannot write it back).
func readTime(raw []byte) (time.Time, error) {
	s, err := readString(raw)
	if err != nil {
		return time.Time{}, fmt.Errorf("want an RFC 3339 time such as \"2026-01-02T15:04:05Z\", got %s", cut(string(raw)))
	}
	var t time.Time
	if err := t.UnmarshalJSON(raw); err != nil {
		return time.Time{}, fmt.Errorf("%s is not an RFC 3339 time such as \"2026-01-02T15:04:05Z\"", quote(s))
	}
	t = t.UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		return time.Time{}, fmt.Errorf("%s is out of range: want a year from 0 to 9999 in UTC", quote(s))
	}
	return t, nil
}

// readStringMap reads a JSON object whose values are strings.
func readStringMap(raw []byte) (map[string]string, error) {
	ms, err := readObject(raw)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(ms))
	for _, m := range ms {
		s, err := readString(m.raw)
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", quote(m.key), err)
		}
		out[m.key] = s
	}
	return out, nil
}

// kind is the first byte of a JSON value (raw values from a decoder have
// no leading space), 0 for an empty one.
func kind(raw []byte) byte {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return 0
	}
	return raw[0]
}

// describe names what a decoder read instead of what was wanted.
func describe(raw []byte, tok json.Token, err error) string {
	switch {
	case err == io.EOF, errors.Is(err, io.ErrUnexpectedEOF):
		if len(bytes.TrimSpace(raw)) == 0 && raw != nil {
			return "nothing"
		}
		return "the end of the document"
	case err != nil:
		return err.Error()
	case raw != nil:
		return cut(string(bytes.TrimSpace(raw)))
	case tok == nil:
		return "null"
	}
	return cut(fmt.Sprint(tok))
}

// quote quotes s for an error, cut to maxQuoted bytes.
func quote(s string) string {
	if len(s) > maxQuoted {
		return fmt.Sprintf("%q...", strings.ToValidUTF8(s[:maxQuoted], ""))
	}
	return fmt.Sprintf("%q", s)
}

// cut cuts s to maxQuoted bytes for an error.
func cut(s string) string {
	if len(s) > maxQuoted {
		return strings.ToValidUTF8(s[:maxQuoted], "") + "..."
	}
	return s
}
