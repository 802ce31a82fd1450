package tui

import (
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// column is one column of a table. A column with a minimum gives up width,
// widest first, when the table is wider than the screen; one without keeps
// its natural width.
type column struct {
	title string
	min   int
}

// ellipsis ends a cell cut short.
const ellipsis = "…"

// layout gives each column its width: the widest of its title and cells,
// with the shrinkable columns cut down, the widest first, until the table
// (gap between columns) fits width.
func layout(cols []column, rows [][]string, width, gap int) []int {
	widths := make([]int, len(cols))
	for i, c := range cols {
		widths[i] = ansi.StringWidth(c.title)
	}
	for _, row := range rows {
		for i := range cols {
			if i < len(row) {
				widths[i] = max(widths[i], ansi.StringWidth(row[i]))
			}
		}
	}
	total := func() int {
		sum := gap * (len(widths) - 1)
		for _, w := range widths {
			sum += w
		}
		return sum
	}
	for excess := total() - width; excess > 0; excess-- {
		widest := -1
		for i, c := range cols {
			if c.min > 0 && widths[i] > c.min && (widest < 0 || widths[i] > widths[widest]) {
				widest = i
			}
		}
		if widest < 0 {
			break
		}
		widths[widest]--
	}
	return widths
}

// cells pads or cuts each cell to its column's width and joins them.
func cells(row []string, widths []int, gap int) string {
	var b strings.Builder
	for i, w := range widths {
		cell := ""
		if i < len(row) {
			cell = row[i]
		}
		if i > 0 {
			b.WriteString(strings.Repeat(" ", gap))
		}
		b.WriteString(fit(cell, w))
	}
	return strings.TrimRight(b.String(), " ")
}

// fit pads s with spaces, or cuts it with an ellipsis, to exactly width
// cells.
func fit(s string, width int) string {
	if width <= 0 {
		return ""
	}
	if ansi.StringWidth(s) > width {
		s = ansi.Truncate(s, width, ellipsis)
	}
	return s + strings.Repeat(" ", width-ansi.StringWidth(s))
}

// clip cuts a line that would overflow the screen.
func clip(s string, width int) string {
	if ansi.StringWidth(s) <= width {
		return s
	}
	return ansi.Truncate(s, width, ellipsis)
}

// wrap breaks text into lines of at most width cells at spaces (a word
// longer than a line is cut).
func wrap(text string, width int) []string {
	var lines []string
	for _, paragraph := range strings.Split(text, "\n") {
		line := ""
		for _, word := range strings.Fields(paragraph) {
			switch {
			case line == "":
				line = word
			case ansi.StringWidth(line)+1+ansi.StringWidth(word) <= width:
				line += " " + word
			default:
				lines = append(lines, clip(line, width))
				line = word
			}
		}
		lines = append(lines, clip(line, width))
	}
	return lines
}
