package bolt

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
)

// crashChildEnv names the database a child process of
// TestKilledWriterLeavesASoundFile writes to until it is killed.
const crashChildEnv = "BOLT_CRASH_CHILD_DB"

// TestKilledWriterLeavesASoundFile kills (SIGKILL) a process in the middle
// of concurrent writes, five times on one file: each time the file passes
// the check at open (a crash must never look like damage) and holds every
// write the killed process saw acknowledged.
func TestKilledWriterLeavesASoundFile(t *testing.T) {
	if path := os.Getenv(crashChildEnv); path != "" {
		crashChild(t, path)
		return
	}
	g := NewWithT(t)
	cfg := testConfig(t)
	for cycle := range 5 {
		acked := runAndKill(t, cfg.DBPath, cycle, 300)
		p := newPlugin(t, cfg)
		g.Expect(p.Init()).To(Succeed(), "cycle %d: the file of a killed writer opens", cycle)
		for key := range acked {
			_, found, err := p.Get(t.Context(), key)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(found).To(BeTrue(), "cycle %d: acknowledged key %s", cycle, key)
		}
		g.Expect(p.Close()).To(Succeed())
	}
}

// runAndKill starts a child writing to path and kills it once it has
// reported n acknowledged keys; it returns them.
func runAndKill(t *testing.T, path string, cycle, n int) map[string]bool {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledWriterLeavesASoundFile$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path, fmt.Sprintf("BOLT_CRASH_CYCLE=%d", cycle))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[string]bool{}
	sc := bufio.NewScanner(out)
	prefix := fmt.Sprintf("c%d/", cycle)
	for len(acked) < n && sc.Scan() {
		if strings.HasPrefix(sc.Text(), prefix) {
			acked[sc.Text()] = true
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // killed: the error is expected
	if len(acked) < n {
		t.Fatalf("cycle %d: the child reported %d writes, want %d", cycle, len(acked), n)
	}
	return acked
}

// crashChild writes from eight goroutines (puts of growing values and
// deletes, so that pages are freed and reused) and prints each key once
// its write is acknowledged, until it is killed.
func crashChild(t *testing.T, path string) {
	cfg := DefaultConfig()
	cfg.DBPath = path
	p := newPlugin(t, cfg)
	if err := p.Init(); err != nil {
		t.Fatalf("child Init: %v", err)
	}
	cycle := os.Getenv("BOLT_CRASH_CYCLE")
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				key := fmt.Sprintf("c%s/w%d/%06d", cycle, w, i)
				if err := p.Put(t.Context(), key, make([]byte, 50+i%3000)); err != nil {
					t.Errorf("child Put: %v", err)
					return
				}
				if i%4 == 3 {
					if _, err := p.Delete(t.Context(), fmt.Sprintf("c%s/w%d/%06d", cycle, w, i-3)); err != nil {
						t.Errorf("child Delete: %v", err)
						return
					}
				}
				mu.Lock()
				if i%4 != 0 { // keys i-3 with i%4 == 3 are deleted again
					fmt.Println(key)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}
