// Package inventory is the flash-sale domain of the articles (002, 000
// §3.3–3.4): stock kept in PostgreSQL (pgx) or SQLite (modernc.org/sqlite),
// and six ways to sell it, each a Strategy with one Buy:
//
//	naive        read, check, write the computed value: oversells (002 §1.1)
//	lock         per-sku dlock lock; read, check, write, commit, release (000 §3.3 A)
//	conditional  UPDATE … WHERE qty >= n; no lock (000 §3.3 B, the default)
//	optimistic   version column, bounded retries (002 §3.3)
//	fenced       lock + the fence column: a stale holder's write is rejected
//	prededuct    Redis pre-deduct in Lua + a Redis Stream persisted to SQL (000 §3.3 C)
//
// Every strategy validates its input (ErrInvalidInput, ErrUnknownSKU: nothing
// is changed) and is idempotent per request id: a retried request never buys
// twice and gets the first request's result. The SQL strategies claim the
// request id in the idem table first (000 §3.4: 0 processing, 1 done,
// 2 failed); a failed or busy request may be retried; the order row's
// UNIQUE request_id is the last backstop. Reconcile checks what was sold
// against what was put on sale.
package inventory

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"
)

// Sentinel errors; test with errors.Is.
var (
	// ErrInvalidInput: qty <= 0 or above the per-order limit; a buyer or
	// request id that is empty, longer than MaxIDLen bytes, not valid UTF-8
	// or holds a control character such as NUL; a malformed sku. Nothing
	// was changed.
	ErrInvalidInput = errors.New("inventory: invalid input")
	// ErrUnknownSKU: no stock row for the sku. Nothing was changed.
	ErrUnknownSKU = errors.New("inventory: unknown sku")
	// ErrNotWarmedUp: prededuct found no stock key in Redis for a sku that
	// exists in SQL: the warm-up step was skipped or the key was lost. A
	// system error, not "sold out" (000 §3.3 C's -2).
	ErrNotWarmedUp = errors.New("inventory: stock not warmed up in Redis")
	// ErrLockLost: the lock strategy committed, then found its lock lost:
	// the sale happened without exclusivity and must be reconciled. It
	// wraps dlock.ErrLockLost too.
	ErrLockLost = errors.New("inventory: lock lost during the purchase")
	// ErrNotPersisted: prededuct sold the units in Redis but the consumer
	// could not write the order to SQL (its request id belongs to another
	// order, or SQL had less stock than Redis); the units were returned to
	// Redis and the entry kept in the dead-letter stream.
	ErrNotPersisted = errors.New("inventory: pre-deducted order could not be persisted")
	// ErrExists: AddSKU of a sku that already exists with another quantity.
	ErrExists = errors.New("inventory: sku exists")
)

// Outcome is what a Buy did.
type Outcome string

// The outcomes of Buy.
const (
	Sold    Outcome = "sold"     // the order was taken
	SoldOut Outcome = "sold_out" // not enough stock; nothing changed
	Busy    Outcome = "busy"     // try again later: lock not acquired in time, too many conflicts, or the same request id is being processed
	Failed  Outcome = "error"    // see the error; a retry with the same request id is allowed
)

// Result is the result of one Buy.
type Result struct {
	Outcome Outcome
	// OrderID is the order's id when sold and persisted (0 for a prededuct
	// sale, whose order is written asynchronously).
	OrderID int64
	// Left is the stock left right after this sale, or -1 when unknown.
	Left int64
	// Replayed: the request id was seen before and this is its first result.
	Replayed bool
	// Queued: prededuct sold the units in Redis; the order row follows
	// through the stream.
	Queued bool
	// LeaseLost (fenced): the lease was lost during the purchase, yet the
	// storage accepted the write because no newer holder had written: the
	// fence proves it was not superseded.
	LeaseLost bool
	// Reason says why the outcome is Busy.
	Reason string
}

// Strategy sells stock. Buy takes qty units of sku for buyer; requestID
// makes it idempotent. It returns the Result and, when Outcome is Failed,
// the error (nil otherwise).
type Strategy interface {
	Name() string
	Buy(ctx context.Context, sku string, qty int64, buyer, requestID string) (Result, error)
	// Reconcile checks the sku's books (see Report).
	Reconcile(ctx context.Context, sku string) (Report, error)
}

// Defaults of Options.
const (
	DefaultMaxQty      = 5
	DefaultThinkTime   = 5 * time.Millisecond
	DefaultWait        = 3 * time.Second
	DefaultRetries     = 32
	DefaultStaleAfter  = 30 * time.Second
	DefaultRedisPrefix = "inv:"
	DefaultRequestTTL  = 24 * time.Hour
	MaxSKULen          = 64
	MaxIDLen           = 128
)

// Options configures a strategy; each uses the fields that concern it.
type Options struct {
	// MaxQty is the per-order limit (default DefaultMaxQty).
	MaxQty int64
	// ThinkTime is a pause inside the critical section: naive sleeps
	// between its read and its write (default DefaultThinkTime; negative
	// means none), lock and fenced between acquiring and their transaction
	// (default none): the GC pause or slow call of the articles.
	ThinkTime time.Duration
	// Wait bounds the lock wait of lock and fenced (default DefaultWait);
	// when it runs out the result is Busy.
	Wait time.Duration
	// Lease is the lock lease of lock and fenced; 0 lets the watchdog keep
	// the lock.
	Lease time.Duration
	// Retries bounds optimistic's attempts (default DefaultRetries); when
	// they run out the result is Busy.
	Retries int
	// StaleAfter is how long a request id may stay "processing" before a
	// retry may take it over (a crashed process; default DefaultStaleAfter).
	StaleAfter time.Duration
	// RedisPrefix prefixes prededuct's Redis keys (default
	// DefaultRedisPrefix); it may not contain braces.
	RedisPrefix string
	// RequestTTL is how long prededuct remembers a request id in Redis
	// (default DefaultRequestTTL), refreshed by every request on the sku.
	RequestTTL time.Duration
}

func (o Options) withDefaults() Options {
	if o.MaxQty <= 0 {
		o.MaxQty = DefaultMaxQty
	}
	if o.Wait <= 0 {
		o.Wait = DefaultWait
	}
	if o.Retries <= 0 {
		o.Retries = DefaultRetries
	}
	if o.StaleAfter <= 0 {
		o.StaleAfter = DefaultStaleAfter
	}
	if o.RedisPrefix == "" {
		o.RedisPrefix = DefaultRedisPrefix
	}
	if o.RequestTTL <= 0 {
		o.RequestTTL = DefaultRequestTTL
	}
	return o
}

// validate checks one Buy's input.
func (o Options) validate(sku string, qty int64, buyer, requestID string) error {
	if err := validSKU(sku); err != nil {
		return err
	}
	switch {
	case qty <= 0:
		return fmt.Errorf("%w: qty %d (want 1..%d)", ErrInvalidInput, qty, o.MaxQty)
	case qty > o.MaxQty:
		return fmt.Errorf("%w: qty %d above the per-order limit %d", ErrInvalidInput, qty, o.MaxQty)
	}
	if err := validText("buyer", buyer); err != nil {
		return err
	}
	return validText("request id", requestID)
}

// validText accepts 1..MaxIDLen bytes of valid UTF-8 without control
// characters (NUL included): every store keeps such a string as it is.
func validText(field, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: %s is empty (want 1..%d bytes)", ErrInvalidInput, field, MaxIDLen)
	case len(s) > MaxIDLen:
		return fmt.Errorf("%w: %s is %d bytes long (want 1..%d)", ErrInvalidInput, field, len(s), MaxIDLen)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidInput, field)
	}
	for i, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: %s has a control character (U+%04X) at byte %d", ErrInvalidInput, field, r, i)
		}
	}
	return nil
}

// validSKU accepts 1..64 bytes of letters, digits and - _ . : (no braces,
// so a sku is a safe Redis hash tag).
func validSKU(sku string) error {
	if sku == "" || len(sku) > MaxSKULen {
		return fmt.Errorf("%w: sku must be 1..%d bytes", ErrInvalidInput, MaxSKULen)
	}
	for _, r := range sku {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' || r == ':'
		if !ok {
			return fmt.Errorf("%w: sku %q: only letters, digits and - _ . :", ErrInvalidInput, sku)
		}
	}
	return nil
}

// failed returns a Failed result for err.
func failed(err error) (Result, error) { return Result{Outcome: Failed, Left: -1}, err }

// busy returns a Busy result.
func busy(reason string) (Result, error) { return Result{Outcome: Busy, Left: -1, Reason: reason}, nil }
