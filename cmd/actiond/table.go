package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
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
