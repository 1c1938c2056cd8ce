package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"
)

// Output of the views (nodes, pods, ipam): the -o formats, colour, the
// tables, fill bars and relative times.

// Output formats.
const (
	formatTable = "table"
	formatWide  = "wide"
	formatJSON  = "json"
	formatYAML  = "yaml"
	formatName  = "name"
)

// checkFormat checks -o of command cmd against the formats it takes.
func checkFormat(cmd, format string, allowed []string, usage func(io.Writer)) error {
	for _, a := range allowed {
		if format == a {
			return nil
		}
	}
	return &usageError{msg: fmt.Sprintf("%s: -o %q: want %s", cmd, format, orList(allowed)), usage: usage}
}

// orList is "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// writeData writes v as indented JSON or as YAML (the same field names:
// sigs.k8s.io/yaml converts the JSON).
func writeData(w io.Writer, format string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if format == formatYAML {
		if data, err = yaml.JSONToYAML(data); err != nil {
			return err
		}
	} else {
		data = append(data, '\n')
	}
	_, err = w.Write(data)
	return err
}

// ANSI colours (each code has the same length, so that every cell of a
// coloured column carries as many invisible bytes: see painter).
const (
	colorRed     = "31"
	colorGreen   = "32"
	colorYellow  = "33"
	colorDefault = "39"
)

// painter colours table cells, or leaves them alone.
type painter struct{ on bool }

// newPainter is the painter of -color and the terminal: auto colours only
// when stdout is a terminal and NO_COLOR is unset (or empty).
func newPainter(g *globals, cio *cmdIO) painter {
	switch g.color {
	case "always":
		return painter{on: true}
	case "never":
		return painter{}
	}
	if v, ok := cio.env(envNoColor); ok && v != "" {
		return painter{}
	}
	return painter{on: cio.tty}
}

// paint is s in colour code. With colour on, every cell of a column that
// may be coloured goes through paint (colorDefault for a plain one): the
// escapes then add the same width to each cell and tabwriter still aligns
// the column.
func (p painter) paint(code, s string) string {
	if !p.on {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

// newTable is a tabwriter for a table: two spaces between columns.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
}

// row writes cells as one row of tw.
func row(tw io.Writer, cells ...string) {
	_, _ = fmt.Fprintln(tw, strings.Join(cells, "\t"))
}

// barWidth is the number of marks in a fill bar.
const barWidth = 12

// fillBar is a text bar of used of total: "[#######.....] 58% 148/254";
// "-" without a total.
func fillBar(used, total uint64) string {
	if total == 0 {
		return fmt.Sprintf("[%s] -", strings.Repeat("?", barWidth))
	}
	marks := int(used * barWidth / total)
	if used > 0 && marks == 0 {
		marks = 1
	}
	return fmt.Sprintf("[%s%s] %d%% %d/%d", strings.Repeat("#", marks), strings.Repeat(".", barWidth-marks),
		percent(used, total), used, total)
}

// percent is used of total in whole percent, rounded down (100 only when
// full).
func percent(used, total uint64) uint64 {
	if total == 0 {
		return 0
	}
	return used * 100 / total
}

// fillColor is the colour of a fill: green below 70%, yellow below 90%,
// red from 90%.
func fillColor(used, total uint64) string {
	switch p := percent(used, total); {
	case total == 0:
		return colorDefault
	case p >= 90:
		return colorRed
	case p >= 70:
		return colorYellow
	}
	return colorGreen
}

// age is how long before now t was, as kubectl shows ages: "45s",
// "3m20s", "95m", "5h10m", "30h", "12d"; "-" for the zero time; a time
// after now is "in ..." .
func age(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	if d < 0 {
		return "in " + shortDuration(-d)
	}
	return shortDuration(d)
}

// shortDuration is d in at most two units.
func shortDuration(d time.Duration) string {
	s := int64(d / time.Second)
	switch {
	case s < 120:
		return fmt.Sprintf("%ds", s)
	case s < 10*60:
		if s%60 == 0 {
			return fmt.Sprintf("%dm", s/60)
		}
		return fmt.Sprintf("%dm%ds", s/60, s%60)
	case s < 3*3600:
		return fmt.Sprintf("%dm", s/60)
	case s < 8*3600:
		if m := (s / 60) % 60; m != 0 {
			return fmt.Sprintf("%dh%dm", s/3600, m)
		}
		return fmt.Sprintf("%dh", s/3600)
	case s < 48*3600:
		return fmt.Sprintf("%dh", s/3600)
	}
	return fmt.Sprintf("%dd", s/86400)
}

// joinOr joins list with ",", "-" for none.
func joinOr(list []string) string {
	if len(list) == 0 {
		return "-"
	}
	return cell(strings.Join(list, ","))
}
