package rest

import (
	"bytes"
	"encoding/json"
	"html/template"
	"io"
	"log/slog"
	"net/http"
)

// Formatter writes response bodies with the right Content-Type. It is safe
// for concurrent use.
type Formatter struct {
	log *slog.Logger
}

// NewFormatter returns a Formatter that reports failed writes to log at
// debug level; log may be nil.
func NewFormatter(log *slog.Logger) *Formatter {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Formatter{log: log}
}

// JSON writes v as indented JSON. If v cannot be encoded, the client gets a
// 500 with the encoding error instead.
func (f *Formatter) JSON(w http.ResponseWriter, status int, v any) {
	body, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		f.write(w, http.StatusInternalServerError, "application/json; charset=utf-8", encodingError(err))
		return
	}
	f.write(w, status, "application/json; charset=utf-8", append(body, '\n'))
}

// encodingError is the body of the 500 that answers a value json cannot
// encode.
func encodingError(err error) []byte {
	body, _ := json.Marshal(errorBody{Error: "encoding response: " + err.Error()})
	return append(body, '\n')
}

// JSONStream writes the bytes JSON writes for v, for a large v: it
// indents the compact encoding while writing it, through a small buffer,
// instead of holding the indented body and a copy of it. If v cannot be
// encoded, the client gets JSON's 500 (nothing is written before v is
// encoded).
func (f *Formatter) JSONStream(w http.ResponseWriter, status int, v any) {
	out := &headerOnWrite{w: w, status: status}
	iw := &indentWriter{w: out, buf: make([]byte, 0, indentChunk+indentChunk/4)}
	if err := json.NewEncoder(iw).Encode(v); err != nil {
		if !out.started {
			f.write(w, http.StatusInternalServerError, "application/json; charset=utf-8", encodingError(err))
			return
		}
		f.log.Debug("writing response failed", "error", err)
		return
	}
	iw.buf = append(iw.buf, '\n')
	if err := iw.flush(); err != nil {
		f.log.Debug("writing response failed", "error", err)
	}
}

// headerOnWrite sends the JSON headers and status before the first body
// bytes.
type headerOnWrite struct {
	w       http.ResponseWriter
	status  int
	started bool
}

func (h *headerOnWrite) Write(b []byte) (int, error) {
	if !h.started {
		h.started = true
		h.w.Header().Set("Content-Type", "application/json; charset=utf-8")
		h.w.Header().Set("X-Content-Type-Options", "nosniff")
		h.w.WriteHeader(h.status)
	}
	return h.w.Write(b)
}

// JSONList writes an indented JSON array of n items, item(i) for each,
// encoding one item at a time: a long list is never held twice in memory.
// The bytes are those JSON would write for the whole slice. The status is
// sent before the items: an item that cannot be encoded ends the body
// early (logged at error level), and the client sees invalid JSON.
func (f *Formatter) JSONList(w http.ResponseWriter, status int, n int, item func(i int) any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	if n == 0 {
		f.writeBody(w, []byte("[]\n"))
		return
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("  ", "  ")
	for i := range n {
		buf.Reset()
		if i == 0 {
			buf.WriteString("[\n  ")
		} else {
			buf.WriteString(",\n  ")
		}
		if err := enc.Encode(item(i)); err != nil {
			f.log.Error("encoding response item failed; body cut short", "item", i, "error", err)
			return
		}
		buf.Truncate(buf.Len() - 1) // Encode's newline
		if !f.writeBody(w, buf.Bytes()) {
			return
		}
	}
	f.writeBody(w, []byte("\n]\n"))
}

// Error writes {"error": err.Error()} as JSON.
func (f *Formatter) Error(w http.ResponseWriter, status int, err error) {
	msg := http.StatusText(status)
	if err != nil {
		msg = err.Error()
	}
	f.JSON(w, status, errorBody{Error: msg})
}

// Text writes s as plain text.
func (f *Formatter) Text(w http.ResponseWriter, status int, s string) {
	f.write(w, status, "text/plain; charset=utf-8", []byte(s))
}

// HTML executes tmpl with data and writes the result. If the template
// fails, the client gets a 500 with the error as plain text.
func (f *Formatter) HTML(w http.ResponseWriter, status int, tmpl *template.Template, data any) {
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, data); err != nil {
		f.Text(w, http.StatusInternalServerError, "rendering template: "+err.Error())
		return
	}
	f.write(w, status, "text/html; charset=utf-8", buf.Bytes())
}

func (f *Formatter) write(w http.ResponseWriter, status int, contentType string, body []byte) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	f.writeBody(w, body)
}

// writeBody writes b and reports whether it succeeded (a client that went
// away is logged at debug level).
func (f *Formatter) writeBody(w http.ResponseWriter, b []byte) bool {
	if _, err := w.Write(b); err != nil {
		f.log.Debug("writing response failed", "error", err)
		return false
	}
	return true
}

// errorBody is the JSON shape of every error response.
type errorBody struct {
	Error string `json:"error"`
}
