package rest

import (
	"bytes"
	"encoding/json"
	"testing"
)

// indentWriter keeps its state between writes: a value written one byte
// at a time (a backslash and the quote it escapes in two writes) comes
// out as json.Indent writes it whole.
func TestIndentWriterAcrossWrites(t *testing.T) {
	src := []byte(`{"a\\":"b\"},[","c":[],"d":{},"e":[1,{"f":null}],"g":"\\\\"}`)
	var want bytes.Buffer
	if err := json.Indent(&want, src, "", "  "); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	iw := &indentWriter{w: &got}
	for i := range src {
		if _, err := iw.Write(src[i : i+1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := iw.flush(); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Errorf("got\n%s\nwant\n%s", got.String(), want.String())
	}
}
