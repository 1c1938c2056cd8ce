package engine

import (
	"math/rand/v2"
	"testing"
)

func TestBitmapNextFit(t *testing.T) {
	m := newBitmap(130) // not a multiple of 64: the tail bits of the last word must stay unused
	for want := range uint64(130) {
		if got, ok := m.next(); !ok || got != want {
			t.Fatalf("next = %d, %v; want %d", got, ok, want)
		}
	}
	if got, ok := m.next(); ok {
		t.Fatalf("next on a full bitmap = %d, want none", got)
	}
	if !m.free(77) || !m.free(5) || m.free(5) {
		t.Fatal("free: want true, true, then false for a clear bit")
	}
	// The cursor wrapped at 130: next-fit finds 5, then 77, then nothing.
	for _, want := range []uint64{5, 77} {
		if got, ok := m.next(); !ok || got != want {
			t.Fatalf("next = %d, %v; want %d", got, ok, want)
		}
	}
	if _, ok := m.next(); ok || m.take(77) {
		t.Fatal("the bitmap must be full again")
	}
}

// TestBitmapAgainstModel churns a bitmap and a map model side by side: next
// must return the first clear bit at or after the cursor, wrapping.
func TestBitmapAgainstModel(t *testing.T) {
	const n = 200
	m, set := newBitmap(n), make(map[uint64]bool)
	rng := rand.New(rand.NewPCG(7, 8))
	cursor := uint64(0)
	for range 5000 {
		if i := rng.Uint64N(n); rng.IntN(2) == 0 {
			if got := m.free(i); got != set[i] {
				t.Fatalf("free(%d) = %v, model says set=%v", i, got, set[i])
			}
			delete(set, i)
			continue
		}
		want, ok := uint64(0), false
		for k := range uint64(n) {
			if j := (cursor + k) % n; !set[j] {
				want, ok = j, true
				break
			}
		}
		got, gotOK := m.next()
		if gotOK != ok || got != want {
			t.Fatalf("next = %d, %v; model says %d, %v", got, gotOK, want, ok)
		}
		if ok {
			set[got], cursor = true, (got+1)%n
		}
	}
}
