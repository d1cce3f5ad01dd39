package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"unicode/utf8"
)

// orderRequest is the body of POST /orders; the strategy validates the
// values (inventory.ErrInvalidInput).
type orderRequest struct {
	SKU       string
	Qty       int64
	Buyer     string
	RequestID string
}

// orderBody is what the JSON may hold: nil is a missing field.
type orderBody struct {
	SKU       *string `json:"sku"`
	Qty       *int64  `json:"qty"`
	Buyer     *string `json:"buyer"`
	RequestID *string `json:"request_id"`
}

// bodyError is a request body the shop cannot take: the HTTP status, the
// error code and a message for the client.
type bodyError struct {
	status int
	code   string
	msg    string
}

func (e *bodyError) Error() string { return e.msg }

func badBody(status int, code, format string, a ...any) *bodyError {
	return &bodyError{status: status, code: code, msg: fmt.Sprintf(format, a...)}
}

// readOrder reads and decodes a POST /orders body of at most maxBody bytes:
// one JSON object of valid UTF-8 with the four fields and no others. Its
// errors are *bodyError: 413 body_too_large, 400 bad_json (not such an
// object), 400 invalid_input (a field missing or of the wrong type). The
// messages name the JSON fields, never Go types.
func readOrder(w http.ResponseWriter, r *http.Request, maxBody int64) (orderRequest, *bodyError) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return orderRequest{}, badBody(http.StatusRequestEntityTooLarge, "body_too_large", "request body larger than %d bytes", maxBody)
		}
		return orderRequest{}, badBody(http.StatusBadRequest, "bad_json", "request body could not be read")
	}
	if !utf8.Valid(data) {
		return orderRequest{}, badBody(http.StatusBadRequest, "invalid_input", "request body is not valid UTF-8")
	}
	var b orderBody
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return orderRequest{}, jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return orderRequest{}, badBody(http.StatusBadRequest, "bad_json", "request body: one JSON object expected, found more after it")
	}
	var missing []string
	for _, f := range []struct {
		name string
		nil  bool
	}{{"sku", b.SKU == nil}, {"qty", b.Qty == nil}, {"buyer", b.Buyer == nil}, {"request_id", b.RequestID == nil}} {
		if f.nil {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return orderRequest{}, badBody(http.StatusBadRequest, "invalid_input", "missing: %s", strings.Join(missing, ", "))
	}
	return orderRequest{SKU: *b.SKU, Qty: *b.Qty, Buyer: *b.Buyer, RequestID: *b.RequestID}, nil
}

// jsonError describes a decoding error in the client's terms.
func jsonError(err error) *bodyError {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return badBody(http.StatusBadRequest, "bad_json", "request body is empty: want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badBody(http.StatusBadRequest, "bad_json", "request body: the JSON ends early")
	case errors.As(err, &syn):
		return badBody(http.StatusBadRequest, "bad_json", "request body: malformed JSON at byte %d", syn.Offset)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return badBody(http.StatusBadRequest, "bad_json", "request body: want a JSON object, got %s", jsonKind(typ.Value))
		}
		return badBody(http.StatusBadRequest, "invalid_input", "%s: want %s, got %s", typ.Field, wantKind(typ.Type), jsonKind(typ.Value))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return badBody(http.StatusBadRequest, "bad_json", "request body: unknown field %s (want sku, qty, buyer, request_id)",
			strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return badBody(http.StatusBadRequest, "bad_json", "request body: not a JSON object with sku, qty, buyer, request_id")
}

// wantKind names what a field wants in JSON terms.
func wantKind(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && t.Kind() == reflect.String {
		return "a string"
	}
	return "a whole number"
}

// jsonKind names what the client sent, from UnmarshalTypeError.Value
// ("string", "number 1.5", "array", …).
func jsonKind(v string) string {
	switch {
	case v == "number" || strings.HasPrefix(v, "number "):
		return v
	case v == "array", v == "object":
		return "an " + v
	case v == "":
		return "another type"
	}
	return "a " + v
}
