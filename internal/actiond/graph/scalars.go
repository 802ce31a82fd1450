package graph

import (
	"encoding/json"
	"fmt"

	"github.com/incusspawn/isx/internal/actiond/graph/model"
)

// toJSON encodes v for a JSON field; nil stays null.
func toJSON(v any) (model.JSON, error) {
	if v == nil {
		return nil, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("graph: encode a JSON field: %w", err)
	}
	if string(raw) == "null" {
		return nil, nil
	}
	return raw, nil
}
