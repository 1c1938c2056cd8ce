package rest

import (
	"bytes"
	"io"
)

// indentChunk is how many indented bytes indentWriter gathers before it
// writes them on.
const indentChunk = 32 << 10

// indentWriter indents the compact JSON written to it (json.Encoder's)
// as json.Indent(dst, src, "", "  ") does, and writes the result on to w
// in chunks of about indentChunk bytes; call flush after the last Write.
// Its state carries over between writes, so a value may arrive in any
// number of pieces. It checks no syntax: its input is encoding/json's.
// Whitespace outside strings is dropped, as json.Indent drops it.
type indentWriter struct {
	w   io.Writer
	buf []byte
	err error

	depth      int
	needIndent bool // after '{' or '[': a newline unless the next byte closes it
	inString   bool
	escaped    bool // in a string, after a backslash
}

func (iw *indentWriter) Write(p []byte) (int, error) {
	if iw.err != nil {
		return 0, iw.err
	}
	for i := 0; i < len(p); {
		if iw.inString {
			// Fast path: the string ends at the next quote if no
			// backslash comes before it.
			if !iw.escaped {
				if q := bytes.IndexByte(p[i:], '"'); q >= 0 && bytes.IndexByte(p[i:i+q], '\\') < 0 {
					iw.buf = append(iw.buf, p[i:i+q+1]...)
					iw.inString = false
					i += q + 1
					continue
				}
			}
			j := i
			for ; j < len(p); j++ {
				c := p[j]
				if iw.escaped {
					iw.escaped = false
				} else if c == '\\' {
					iw.escaped = true
				} else if c == '"' {
					iw.inString = false
					j++
					break
				}
			}
			iw.buf = append(iw.buf, p[i:j]...)
			i = j
		} else {
			c := p[i]
			i++
			switch c {
			case ' ', '\t', '\r', '\n':
				continue
			}
			if iw.needIndent && c != '}' && c != ']' {
				iw.needIndent = false
				iw.depth++
				iw.newline()
			}
			switch c {
			case '"':
				iw.inString = true
				iw.buf = append(iw.buf, c)
			case '{', '[':
				iw.needIndent = true
				iw.buf = append(iw.buf, c)
			case ',':
				iw.buf = append(iw.buf, c)
				iw.newline()
			case ':':
				iw.buf = append(iw.buf, c, ' ')
			case '}', ']':
				if iw.needIndent { // empty: {} or []
					iw.needIndent = false
				} else {
					iw.depth--
					iw.newline()
				}
				iw.buf = append(iw.buf, c)
			default:
				iw.buf = append(iw.buf, c)
			}
		}
		if len(iw.buf) >= indentChunk {
			if err := iw.flush(); err != nil {
				return i, err
			}
		}
	}
	return len(p), nil
}

// newlineIndents is a newline and the indent of depths up to 32.
const newlineIndents = "\n" + "                                " + "                                "

func (iw *indentWriter) newline() {
	if n := 1 + 2*iw.depth; n <= len(newlineIndents) {
		iw.buf = append(iw.buf, newlineIndents[:n]...)
		return
	}
	iw.buf = append(iw.buf, '\n')
	for range iw.depth {
		iw.buf = append(iw.buf, ' ', ' ')
	}
}

// flush writes the gathered bytes on.
func (iw *indentWriter) flush() error {
	if iw.err != nil || len(iw.buf) == 0 {
		return iw.err
	}
	_, iw.err = iw.w.Write(iw.buf)
	iw.buf = iw.buf[:0]
	return iw.err
}
