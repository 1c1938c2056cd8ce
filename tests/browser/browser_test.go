package browser

import (
	"bytes"
	"errors"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"
)

// hostPage serves a page on the host's loopback whose script changes the
// DOM and which names the request's path and query; hits counts the
// requests per path.
type hostPage struct {
	srv  *httptest.Server
	mu   sync.Mutex
	hits map[string]int
}

func newHostPage(t *testing.T) *hostPage {
	h := &hostPage{hits: map[string]int{}}
	var addr string
	h.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.hits[r.URL.Path]++
		h.mu.Unlock()
		if r.URL.Path == "/leak" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		// The image points at the host's listener as the host sees it:
		// inside the namespace nothing listens there.
		_, _ = fmt.Fprintf(w, `<!DOCTYPE html><html><head><title>t</title></head><body style="background:#3366cc">
<p id="uri">%s</p><p id="js">no script</p><img src="http://%s/leak">
<script>document.getElementById("js").textContent = "script ran";</script></body></html>`,
			r.URL.RequestURI(), addr)
	}))
	addr = h.srv.Listener.Addr().String()
	h.srv.Start()
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hostPage) count(path string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hits[path]
}

func TestDumpDOMLoadsAPageOnTheHostsLoopback(t *testing.T) {
	Require(t)
	g := NewWithT(t)
	page := newHostPage(t)

	dom := DumpDOM(t, page.srv.URL+"/some/page?x=1&y=%3Cb%3E")
	g.Expect(dom).To(ContainSubstring(`<p id="js">script ran</p>`), "the DOM after load, scripts run")
	g.Expect(dom).To(ContainSubstring(`<p id="uri">/some/page?x=1&amp;y=%3Cb%3E</p>`), "path and query reach the page unchanged")
	g.Expect(page.count("/some/page")).To(Equal(1))
	g.Expect(page.count("/leak")).To(BeZero(),
		"chromium reached the host's 127.0.0.1 directly: it must run in a namespace of its own")
}

func TestScreenshotHasTheAskedSize(t *testing.T) {
	Require(t)
	g := NewWithT(t)
	page := newHostPage(t)
	file := filepath.Join(t.TempDir(), "shot.png")

	Screenshot(t, page.srv.URL+"/", file, 640, 480)
	data, err := os.ReadFile(file)
	g.Expect(err).NotTo(HaveOccurred())
	img, err := png.Decode(bytes.NewReader(data))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(img.Bounds().Dx()).To(Equal(640))
	g.Expect(img.Bounds().Dy()).To(Equal(480))
	r, gr, b, _ := img.At(320, 240).RGBA()
	g.Expect([]uint32{r >> 8, gr >> 8, b >> 8}).To(Equal([]uint32{0x33, 0x66, 0xcc}), "the page's background was rendered")
}

// TestNothingIsLeftAfterARun checks that a run leaves no chromium process
// and no network namespace behind.
func TestNothingIsLeftAfterARun(t *testing.T) {
	Require(t)
	g := NewWithT(t)
	page := newHostPage(t)
	var own unix.Stat_t
	g.Expect(unix.Stat("/proc/self/ns/net", &own)).To(Succeed())

	DumpDOM(t, page.srv.URL+"/")
	lastMu.Lock()
	run := lastRun
	lastMu.Unlock()
	g.Expect(run.inode).NotTo(BeZero())
	g.Expect(run.inode).NotTo(Equal(own.Ino), "chromium ran in a namespace of its own")
	g.Expect(errors.Is(syscall.Kill(run.pid, 0), syscall.ESRCH)).To(BeTrue(), "chromium %d still runs", run.pid)
	// Every thread of this process is back in its namespace: the thread
	// that made the namespace went back before it was unlocked (a thread
	// left there, the main one above all, would hold it for the process).
	tasks, err := filepath.Glob("/proc/self/task/[0-9]*")
	g.Expect(err).NotTo(HaveOccurred())
	for _, task := range tasks {
		var st unix.Stat_t
		if unix.Stat(task+"/ns/net", &st) == nil {
			g.Expect(st.Ino).To(Equal(own.Ino), "thread %s is in the test's network namespace", task)
		}
	}
	// Helpers of chromium (zygote, crashpad) may take a moment to go.
	g.Eventually(func() []string { return holders(run.inode, run.profile) }, 10*time.Second, 100*time.Millisecond).
		Should(BeEmpty(), "processes still in the run's namespace or on its profile")
}

// holders lists the processes (and threads) whose network namespace is
// inode, or whose command line names profile.
func holders(inode uint64, profile string) []string {
	var out []string
	pids, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range pids {
		tasks, _ := filepath.Glob(p + "/task/[0-9]*")
		for _, task := range append(tasks, p) {
			var st unix.Stat_t
			if unix.Stat(task+"/ns/net", &st) == nil && st.Ino == inode {
				comm, _ := os.ReadFile(task + "/comm")
				status, _ := os.ReadFile(task + "/status")
				ppid := regexp.MustCompile(`(?m)^PPid:\s*(\d+)`).FindSubmatch(status)
				tgid := regexp.MustCompile(`(?m)^Tgid:\s*(\d+)`).FindSubmatch(status)
				state := regexp.MustCompile(`(?m)^State:\s*(.*)`).FindSubmatch(status)
				desc := strings.TrimSpace(string(comm))
				if ppid != nil && state != nil && tgid != nil {
					desc += " tgid " + string(tgid[1]) + " ppid " + string(ppid[1]) + " state " + string(state[1]) + fmt.Sprintf(" (this test: %d)", os.Getpid())
				}
				out = append(out, task+" is in the namespace ("+desc+")")
			}
		}
		if cmdline, err := os.ReadFile(p + "/cmdline"); err == nil && bytes.Contains(cmdline, []byte(profile)) {
			out = append(out, p+" runs on the profile: "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return out
}

func TestOnlyLoopbackURLs(t *testing.T) {
	cases := []struct {
		url, host string
		ok        bool
	}{
		{url: "http://127.0.0.1:8080/a?b=c", host: "127.0.0.1:8080", ok: true},
		{url: "http://localhost:9/", host: "127.0.0.1:9", ok: true},
		{url: "http://[::1]:9999/", host: "[::1]:9999", ok: true},
		{url: "http://127.0.0.1/", host: "127.0.0.1:80", ok: true},
		{url: "http://10.1.2.3:80/"},
		{url: "http://example.com/"},
		{url: "file:///etc/passwd"},
	}
	for _, tc := range cases {
		t.Run(tc.url, func(t *testing.T) {
			g := NewWithT(t)
			_, host, err := loopbackURL(tc.url)
			if !tc.ok {
				g.Expect(err).To(HaveOccurred())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(host).To(Equal(tc.host))
		})
	}
}

// failTB records a Fatal instead of failing the test.
type failTB struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (f *failTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *failTB) Fatal(args ...any) { f.Fatalf("%s", fmt.Sprint(args...)) }

func TestAPageThatNeverAnswersFailsTheTest(t *testing.T) {
	Require(t)
	g := NewWithT(t)
	stall := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-stall:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(stall); srv.Close() })
	timeout = 5 * time.Second
	t.Cleanup(func() { timeout = Timeout })
	f := &failTB{TB: t}
	start := time.Now()
	done := make(chan string, 1)
	go func() {
		defer func() {
			f.mu.Lock()
			done <- f.msg
			f.mu.Unlock()
		}()
		out := DumpDOM(f, srv.URL+"/")
		f.mu.Lock()
		f.msg = "returned " + strconv.Quote(out)
		f.mu.Unlock()
	}()
	var msg string
	g.Eventually(done, Timeout).Should(Receive(&msg))
	t.Logf("after %s: %s", time.Since(start), msg)
	g.Expect(msg).NotTo(HavePrefix("returned"), "a page that never loads must fail the test, not give a DOM")
	g.Expect(msg).To(ContainSubstring("chromium did not finish within 5s"))
}
