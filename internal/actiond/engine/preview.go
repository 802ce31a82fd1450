package engine

import (
	"context"
	"encoding/json"

	"github.com/incusspawn/isx/internal/actiond/policy"
	"github.com/incusspawn/isx/internal/actiond/registry"
	"github.com/incusspawn/isx/internal/actiond/store"
)

// MaxPreviewBytes bounds the rows a preview's result lists, by the size of
// their JSON: a row past it is counted in omitted_writes instead.
const MaxPreviewBytes = 256 << 10

// previewWrites is what a preview (of a program, or of what invoke ran)
// tells the external agent about the rows its work would write: each row
// the principal may read, through its own policies and the server's, with
// its table, key and new value; a row it may not read, or a deleted one,
// only counted in unreadable, so that a preview cannot reveal what the
// principal could not read; and the rows past MaxPreviewBytes counted in
// omitted. The execution's write set keeps every row.
func (e *callEnv) previewWrites(ctx context.Context) (writes []map[string]any, unreadable, omitted int) {
	return summarize(ctx, e.work.Writes(), e.request.call)
}

func summarize(ctx context.Context, rows []store.Write, c *Call) (writes []map[string]any, unreadable, omitted int) {
	writes = []map[string]any{}
	size := 0
	for _, row := range rows {
		value, ok := readableBy(ctx, c, row)
		if !ok {
			unreadable++
			continue
		}
		// The row's size as the answer's JSON carries it: its value as
		// stored, its table and key, and the object around them.
		rowSize := len(row.Value) + len(row.Table) + len(row.Key) + len(`{"table":"","key":"","value":}`)
		if size+rowSize > MaxPreviewBytes {
			omitted++
			continue
		}
		size += rowSize
		writes = append(writes, map[string]any{"table": row.Table, "key": row.Key, "value": value})
	}
	return writes, unreadable, omitted
}

// readableBy: the principal and the server may SELECT the row as it would
// be written; it answers the row's decoded value. A deleted row has no
// value to check against, so it is never shown, nor is a value that does
// not decode.
func readableBy(ctx context.Context, c *Call, row store.Write) (any, bool) {
	if row.Deleted {
		return nil, false
	}
	var document any
	if err := json.Unmarshal(row.Value, &document); err != nil {
		return nil, false
	}
	request := policy.Request{Operation: policy.Select, Resource: registry.Resource(row.Table), Claims: c.Who.Claims, Document: document}
	return document, policy.Check(ctx, request, c.Layers...) == nil
}
