package graph

// readablePage gathers one page of a list filtered by what the reader may
// read: rows are fetched in batches after the cursor until limit readable
// ones and one more (which says there is a next page) are found, or the list
// ends. The cursor moves past every row looked at, readable or not.
func readablePage[T, C any](limit int, cursor C, fetch func(after C, n int) ([]T, error), next func(T) C, readable func(T) bool) (page []T, hasNext bool, err error) {
	var found []T
	batch := max(limit+1, 64)
	for len(found) <= limit {
		rows, err := fetch(cursor, batch)
		if err != nil {
			return nil, false, err
		}
		for _, row := range rows {
			cursor = next(row)
			if readable(row) {
				found = append(found, row)
				if len(found) > limit {
					break
				}
			}
		}
		if len(rows) < batch {
			break
		}
	}
	return found[:min(limit, len(found))], len(found) > limit, nil
}
