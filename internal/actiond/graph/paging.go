package graph

// Pages of every list.
const (
	defaultPage = 50
	maxPage     = 500
)

func pageSize(first *int) (int, error) {
	if first == nil {
		return defaultPage, nil
	}
	if *first < 0 || *first > maxPage {
		return 0, badRequest("first", "first is a number from 0 to %d", maxPage)
	}
	return *first, nil
}

// keyedPage reads first and after of a list whose cursor is a row's name
// or key, as given.
func keyedPage(first *int, after *string) (limit int, cursor string, err error) {
	limit, err = pageSize(first)
	if after != nil {
		cursor = *after
	}
	return limit, cursor, err
}

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
