package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode/utf8"
)

// table prints aligned columns, as kubectl and docker do: two spaces
// between columns, a header in capitals.
type table struct {
	w   *tabwriter.Writer
	out io.Writer
}

func newTable(out io.Writer, header ...string) *table {
	t := &table{w: tabwriter.NewWriter(out, 0, 0, 2, ' ', 0), out: out}
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		cells[i] = strings.ReplaceAll(c, "\t", " ")
	}
	fmt.Fprintln(t.w, strings.Join(cells, "\t"))
}

// flush writes the table; an empty one is replaced by the note, when given.
func (t *table) flush(empty bool, note string) error {
	if empty && note != "" {
		_, err := fmt.Fprintln(t.out, note)
		return err
	}
	return t.w.Flush()
}

// stream prints rows as they come, under a header, aligned as a table is:
// a followed list cannot wait for the rows that have not happened. Each
// column is as wide as its header, its widest cell among the rows of the
// first flush and its minimum; a later cell wider than that is cut short
// with "…", so that it pushes no cell after it off its column. The last
// column is never cut.
type stream struct {
	out     io.Writer
	header  []string
	minimum []int
	widths  []int
	pending [][]string
}

func newStream(out io.Writer, header []string, minimum []int) *stream {
	return &stream{out: out, header: header, minimum: minimum}
}

func (s *stream) row(cells ...string) {
	for i, c := range cells {
		cells[i] = strings.ReplaceAll(c, "\t", " ")
	}
	s.pending = append(s.pending, cells)
}

// flush prints the rows given since the last one, and the header first.
func (s *stream) flush() error {
	var b strings.Builder
	if s.widths == nil {
		s.widths = make([]int, len(s.header))
		for i, h := range s.header {
			s.widths[i] = max(utf8.RuneCountInString(h), s.minimum[i])
			for _, cells := range s.pending {
				s.widths[i] = max(s.widths[i], utf8.RuneCountInString(cells[i]))
			}
		}
		s.write(&b, s.header)
	}
	for _, cells := range s.pending {
		s.write(&b, cells)
	}
	s.pending = nil
	_, err := io.WriteString(s.out, b.String())
	return err
}

func (s *stream) write(b *strings.Builder, cells []string) {
	last := len(cells) - 1
	for i, c := range cells {
		if i == last {
			b.WriteString(c)
			break
		}
		runes := []rune(c)
		if len(runes) > s.widths[i] {
			runes = append(runes[:s.widths[i]-1], '…')
		}
		b.WriteString(string(runes))
		b.WriteString(strings.Repeat(" ", s.widths[i]-len(runes)+2))
	}
	b.WriteString("\n")
}
