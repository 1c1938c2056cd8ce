package rest

import (
	"log/slog"
	"net/http"
	"time"
)

// accessLog logs every request at debug level once it is answered.
type accessLog struct {
	next http.Handler
	log  *slog.Logger
}

func (a *accessLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !a.log.Enabled(r.Context(), slog.LevelDebug) {
		a.next.ServeHTTP(w, r)
		return
	}
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	a.next.ServeHTTP(rec, r)
	a.log.Debug("HTTP request", "method", r.Method, "path", r.URL.Path, "status", rec.status,
		"bytes", rec.bytes, "remote", r.RemoteAddr, "took", time.Since(start))
}

// statusRecorder remembers the status code and body size of a response.
type statusRecorder struct {
	http.ResponseWriter
	status      int
	bytes       int
	wroteHeader bool
}

func (s *statusRecorder) WriteHeader(code int) {
	if !s.wroteHeader {
		s.status, s.wroteHeader = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	s.wroteHeader = true
	n, err := s.ResponseWriter.Write(b)
	s.bytes += n
	return n, err
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
