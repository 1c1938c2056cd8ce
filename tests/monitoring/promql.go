package monitoring

import (
	"errors"
	"fmt"
	"strings"
)

// MetricNames returns the metric names that the PromQL expression expr
// selects, each once, in the order they first appear. It understands
// enough of PromQL to tell a metric name from the other identifiers:
// function calls and aggregations (an identifier followed by '(' or, for an
// aggregation, by "by"/"without"), keywords and binary operators (and, or,
// unless, bool, offset, atan2, on, ignoring, group_left, group_right, by,
// without) and the label lists they take, label matchers ({...}, where
// __name__="x" and a quoted name "x" also name a metric), ranges and
// subqueries ([...]), strings, numbers and durations, comments, and
// Grafana's template variables ($var, ${var}, [[var]]).
//
// A metric chosen by a regular expression on __name__ cannot be checked:
// it is an error, as are unbalanced brackets and unterminated strings.
func MetricNames(expr string) ([]string, error) {
	l := &lexer{src: expr, seen: map[string]bool{}}
	if err := l.run(); err != nil {
		return nil, fmt.Errorf("%q: %w", expr, err)
	}
	return l.names, nil
}

// Keywords and operators that read like identifiers.
var keywords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true,
	"inf": true, "nan": true,
}

// Modifiers followed by a parenthesised list of label names.
var labelListKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// Aggregation operators: "sum by (x) (...)" puts the modifier between the
// name and its '('.
var aggregations = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
	"limitk": true, "limit_ratio": true,
}

var (
	errUnbalanced = errors.New("unbalanced brackets")
	errString     = errors.New("unterminated string")
	errNameRegexp = errors.New("a metric chosen by a regular expression on __name__ cannot be checked")
)

type lexer struct {
	src   string
	pos   int
	names []string
	seen  map[string]bool
	depth int // open '(' not closed yet
}

func (l *lexer) add(name string) {
	if !l.seen[name] {
		l.seen[name] = true
		l.names = append(l.names, name)
	}
}

func (l *lexer) run() error {
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		switch {
		case isSpace(c):
			l.pos++
		case c == '#':
			l.skipComment()
		case c == '"' || c == '\'' || c == '`':
			if _, err := l.readString(); err != nil {
				return err
			}
		case c == '{':
			if err := l.matchers(); err != nil {
				return err
			}
		case c == '[':
			if err := l.skipRange(); err != nil {
				return err
			}
		case c == '$':
			if err := l.skipVariable(); err != nil {
				return err
			}
		case c == '(':
			l.depth++
			l.pos++
		case c == ')':
			if l.depth == 0 {
				return errUnbalanced
			}
			l.depth--
			l.pos++
		case c == '}' || c == ']':
			return errUnbalanced
		case isDigit(c) || (c == '.' && l.pos+1 < len(l.src) && isDigit(l.src[l.pos+1])):
			l.skipNumber()
		case isIdentStart(c):
			if err := l.identifier(); err != nil {
				return err
			}
		default: // operators, commas, '@'
			l.pos++
		}
	}
	if l.depth != 0 {
		return errUnbalanced
	}
	return nil
}

// identifier classifies the identifier at pos.
func (l *lexer) identifier() error {
	word := l.readIdent()
	lower := strings.ToLower(word)
	next := l.peekNonSpace()
	switch {
	case labelListKeywords[lower]:
		if next == '(' {
			return l.skipParens()
		}
	case keywords[lower]:
	case next == '(':
		// a function or an aggregation: its arguments follow
	case aggregations[lower] && l.nextWordIs("by", "without"):
	default:
		l.add(word)
	}
	return nil
}

// matchers reads a {...} block: label matchers, where __name__="x" and a
// lone quoted string name a metric.
func (l *lexer) matchers() error {
	l.pos++ // '{'
	for {
		l.skipSpace()
		if l.pos >= len(l.src) {
			return errUnbalanced
		}
		switch c := l.src[l.pos]; {
		case c == '}':
			l.pos++
			return nil
		case c == ',':
			l.pos++
			continue
		case c == '"' || c == '\'' || c == '`' || isIdentStart(c):
		default:
			return fmt.Errorf("unexpected %q in label matchers", c)
		}
		var label string
		quoted := false
		if c := l.src[l.pos]; isIdentStart(c) {
			label = l.readIdent()
		} else {
			s, err := l.readString()
			if err != nil {
				return err
			}
			label, quoted = s, true
		}
		l.skipSpace()
		op := l.readOp()
		if op == "" {
			if !quoted {
				return fmt.Errorf("label %q without a matcher", label)
			}
			l.add(label) // {"metric.name", ...}
			continue
		}
		l.skipSpace()
		value, err := l.readString()
		if err != nil {
			return err
		}
		if label == "__name__" {
			if op != "=" {
				return errNameRegexp
			}
			l.add(value)
		}
	}
}

// readOp reads a label matcher operator, "" when there is none.
func (l *lexer) readOp() string {
	for _, op := range []string{"=~", "!~", "!=", "="} {
		if strings.HasPrefix(l.src[l.pos:], op) {
			l.pos += len(op)
			return op
		}
	}
	return ""
}

// readString reads a quoted string and returns its content (escapes are
// kept as written: metric names have none).
func (l *lexer) readString() (string, error) {
	if l.pos >= len(l.src) {
		return "", errString
	}
	q := l.src[l.pos]
	if q != '"' && q != '\'' && q != '`' {
		return "", fmt.Errorf("want a string at %d, found %q", l.pos, q)
	}
	var b strings.Builder
	for i := l.pos + 1; i < len(l.src); i++ {
		c := l.src[i]
		switch {
		case c == '\\' && q != '`':
			if i+1 < len(l.src) {
				b.WriteByte(l.src[i+1])
			}
			i++
		case c == q:
			l.pos = i + 1
			return b.String(), nil
		default:
			b.WriteByte(c)
		}
	}
	return "", errString
}

// skipRange skips a [...] block: a range, a subquery, or Grafana's
// [[variable]].
func (l *lexer) skipRange() error {
	depth := 0
	for ; l.pos < len(l.src); l.pos++ {
		switch l.src[l.pos] {
		case '[':
			depth++
		case ']':
			depth--
			if depth == 0 {
				l.pos++
				return nil
			}
		}
	}
	return errUnbalanced
}

// skipParens skips a parenthesised list of label names.
func (l *lexer) skipParens() error {
	l.skipSpace()
	end := strings.IndexByte(l.src[l.pos:], ')')
	if end < 0 {
		return errUnbalanced
	}
	l.pos += end + 1
	return nil
}

// skipVariable skips $name or ${name...}.
func (l *lexer) skipVariable() error {
	l.pos++ // '$'
	if l.pos < len(l.src) && l.src[l.pos] == '{' {
		end := strings.IndexByte(l.src[l.pos:], '}')
		if end < 0 {
			return errUnbalanced
		}
		l.pos += end + 1
		return nil
	}
	for l.pos < len(l.src) && isIdentPart(l.src[l.pos]) {
		l.pos++
	}
	return nil
}

// skipNumber skips a number or a duration: 1, 0.5, 1e-3, 0x1f, 5m, 1h30m.
func (l *lexer) skipNumber() {
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		switch {
		case isIdentPart(c) || c == '.':
			l.pos++
		case (c == '+' || c == '-') && (l.src[l.pos-1] == 'e' || l.src[l.pos-1] == 'E') &&
			l.pos+1 < len(l.src) && isDigit(l.src[l.pos+1]) && !strings.HasPrefix(l.src[:l.pos], "0x"):
			l.pos++
		default:
			return
		}
	}
}

func (l *lexer) skipComment() {
	if end := strings.IndexByte(l.src[l.pos:], '\n'); end >= 0 {
		l.pos += end + 1
		return
	}
	l.pos = len(l.src)
}

func (l *lexer) readIdent() string {
	start := l.pos
	for l.pos < len(l.src) && isIdentPart(l.src[l.pos]) {
		l.pos++
	}
	return l.src[start:l.pos]
}

func (l *lexer) skipSpace() {
	for l.pos < len(l.src) && isSpace(l.src[l.pos]) {
		l.pos++
	}
}

// peekNonSpace is the next character after white space (0 at the end).
func (l *lexer) peekNonSpace() byte {
	for i := l.pos; i < len(l.src); i++ {
		if !isSpace(l.src[i]) {
			return l.src[i]
		}
	}
	return 0
}

// nextWordIs tells whether the next identifier after white space is one of
// words.
func (l *lexer) nextWordIs(words ...string) bool {
	i := l.pos
	for i < len(l.src) && isSpace(l.src[i]) {
		i++
	}
	j := i
	for j < len(l.src) && isIdentPart(l.src[j]) {
		j++
	}
	w := strings.ToLower(l.src[i:j])
	for _, word := range words {
		if w == word {
			return true
		}
	}
	return false
}

func isSpace(c byte) bool      { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
func isDigit(c byte) bool      { return c >= '0' && c <= '9' }
func isIdentStart(c byte) bool { return c == '_' || c == ':' || (c|0x20 >= 'a' && c|0x20 <= 'z') }
func isIdentPart(c byte) bool  { return isIdentStart(c) || isDigit(c) }
