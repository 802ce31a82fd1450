// Package spelling finds the known name nearest to a mistyped one, so that
// a message can ask "did you mean tpl-dev?" or "did you mean name?". It is
// not a search: a name too far from every known one gets no suggestion.
package spelling

// Nearest is the known name closest to word by edit distance (insertions,
// deletions, substitutions and swaps of neighbours), when that is close
// enough to be a typo: at most a third of word's length, and at most 3.
// Ties go to the earlier name in known. It returns "" when none is close
// enough, or when word itself is known.
func Nearest(word string, known []string) string {
	limit := min(max(len(word)/3, 1), 3)
	best, bestDistance := "", limit+1
	for _, name := range known {
		if name == word {
			return ""
		}
		if d := distance(word, name); d < bestDistance {
			best, bestDistance = name, d
		}
	}
	return best
}

// distance is the optimal string alignment distance between a and b.
func distance(a, b string) int {
	x, y := []rune(a), []rune(b)
	// rows[i][j] is the distance between x[:i] and y[:j].
	rows := make([][]int, len(x)+1)
	for i := range rows {
		rows[i] = make([]int, len(y)+1)
		rows[i][0] = i
	}
	for j := range rows[0] {
		rows[0][j] = j
	}
	for i := 1; i <= len(x); i++ {
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			d := min(rows[i-1][j]+1, rows[i][j-1]+1, rows[i-1][j-1]+cost)
			if i > 1 && j > 1 && x[i-1] == y[j-2] && x[i-2] == y[j-1] {
				d = min(d, rows[i-2][j-2]+1)
			}
			rows[i][j] = d
		}
	}
	return rows[len(x)][len(y)]
}
