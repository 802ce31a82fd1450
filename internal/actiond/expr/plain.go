package expr

import (
	"fmt"
	"math"
	"time"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
)

// plain turns a CEL value into the JSON-shaped Go value Eval returns.
func plain(value ref.Val) (any, error) {
	switch v := value.(type) {
	case *types.Err:
		return nil, v
	case types.Null:
		return nil, nil
	case types.Bool:
		return bool(v), nil
	case types.Int:
		return int64(v), nil
	case types.Uint:
		return uint64(v), nil
	case types.Double:
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("the result %v has no JSON form", f)
		}
		return f, nil
	case types.String:
		return string(v), nil
	case types.Bytes:
		return []byte(v), nil
	case types.Timestamp:
		return v.Time.UTC().Format(time.RFC3339Nano), nil
	case types.Duration:
		return string(v.ConvertToType(types.StringType).(types.String)), nil
	case decimalVal:
		return v.String(), nil
	case moneyVal:
		return v.JSON(), nil
	case dateVal:
		return v.String(), nil
	case *types.Type:
		return v.TypeName(), nil
	case *types.Optional:
		if !v.HasValue() {
			return nil, nil
		}
		return plain(v.GetValue())
	case traits.Mapper:
		return plainMap(v)
	case traits.Lister:
		return plainList(v)
	}
	return nil, fmt.Errorf("the result of type %s has no JSON form", value.Type().TypeName())
}

func plainMap(m traits.Mapper) (map[string]any, error) {
	out := make(map[string]any, int(m.Size().(types.Int)))
	for it := m.Iterator(); it.HasNext() == types.True; {
		key := it.Next()
		var name string
		switch k := key.(type) {
		case types.String:
			name = string(k)
		case types.Int, types.Uint, types.Bool:
			name = fmt.Sprint(k.Value())
		default:
			return nil, fmt.Errorf("a map key of type %s has no JSON form", key.Type().TypeName())
		}
		value, err := plain(m.Get(key))
		if err != nil {
			return nil, err
		}
		out[name] = value
	}
	return out, nil
}

func plainList(l traits.Lister) ([]any, error) {
	out := make([]any, 0, int(l.Size().(types.Int)))
	for it := l.Iterator(); it.HasNext() == types.True; {
		value, err := plain(it.Next())
		if err != nil {
			return nil, err
		}
		out = append(out, value)
	}
	return out, nil
}
