package main

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"time"
	"unicode"
)

// jsonView renders a value for inspect --json and unlock --json the way the
// other commands' JSON looks: snake_case keys in the struct's field order,
// durations in milliseconds under a key ending in _ms (-1: no TTL, as Redis
// says), times in RFC 3339 with milliseconds (omitted when unset), and
// empty slices as [] rather than null. It walks the fields by reflection,
// so a field a lock shape adds to dl.Info shows up without changes here.
func jsonView(v reflect.Value) any {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	switch v.Type() {
	case durationType:
		d := time.Duration(v.Int())
		if d < 0 {
			return int64(-1)
		}
		return d.Milliseconds()
	case timeType:
		return v.Interface().(time.Time).Format("2006-01-02T15:04:05.000Z07:00")
	}
	switch v.Kind() {
	case reflect.Struct:
		var o object
		for _, sf := range reflect.VisibleFields(v.Type()) {
			if !sf.IsExported() || sf.Anonymous {
				continue
			}
			fv := v.FieldByIndex(sf.Index)
			key := snake(sf.Name)
			switch fv.Type() {
			case durationType:
				key += "_ms"
			case timeType:
				if fv.Interface().(time.Time).IsZero() {
					continue
				}
			}
			o = append(o, field{key, jsonView(fv)})
		}
		return o
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			return v.Interface() // []byte: base64, as encoding/json does
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = jsonView(v.Index(i))
		}
		return out
	}
	return v.Interface()
}

// object is a JSON object that keeps its keys in order.
type object []field

type field struct {
	key string
	val any
}

func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(f.key)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(f.val)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// snake turns a Go field name into a snake_case key: "LastFence" →
// "last_fence", "TTL" → "ttl", "PID" → "pid", "HTTPServer" → "http_server".
func snake(name string) string {
	rs := []rune(name)
	var b strings.Builder
	for i, r := range rs {
		if i > 0 && unicode.IsUpper(r) {
			prevLower := unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1])
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if prevLower || (unicode.IsUpper(rs[i-1]) && nextLower) {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}
