// Package fence makes the storage the arbiter of a lock: a write carries the
// fencing token of the lease it was made under (dlock's Lease.Token), and
// the storage accepts it only if no write with a higher token was accepted
// before (000 §2.8: token 33 after 34 is rejected).
//
// For SQL, a row keeps the last token it accepted in a fence column and is
// changed only by a fenced conditional UPDATE (Update):
//
//	UPDATE stock SET qty = qty - $1, fence = $2
//	 WHERE sku = $3 AND fence <= $2 AND (qty >= $1)
//
// Zero rows means either a stale holder (a newer token already wrote) or a
// failed business condition; Update tells the two apart (ErrStale,
// ErrCondition, ErrNoRow). It works with database/sql (Exec) and pgx
// (package fence/pgxfence), inside or outside a transaction.
//
// For data kept in Redis itself, Set writes a value only if its token is at
// least the last token seen for that key (a Lua script), and Get reads both.
//
// Equal tokens are accepted: one holder may write several times under one
// lease. Fencing orders writers; it does not make a read-modify-write safe by
// itself: keep the business condition in the UPDATE (qty >= $1, a version
// column) so that what was read is checked again when written.
package fence

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/dlockgo/dlock/seam"
)

// Sentinel errors; test with errors.Is. The errors of Exec, Set and Get
// name the call and its table or key once, in the format of every dlock
// error: `dlock: fence update "stock": stale token 33 (already saw 34)`,
// `dlock: fence get "doc": no such row`.
var (
	// ErrStale: a write with a higher token was accepted before this one;
	// the writer's lock was lost (expired, failed over) and someone newer
	// wrote. Nothing was changed.
	ErrStale = errors.New("dlock: stale token")
	// ErrCondition: the token was current but the business condition of the
	// write did not hold (sold out, wrong state). Nothing was changed.
	ErrCondition = errors.New("dlock: condition not met")
	// ErrNoRow: no row has the key. Nothing was changed.
	ErrNoRow = errors.New("dlock: no such row")
	// ErrInvalidToken: a token < 1 or >= 2^53 (Redis scripts compare tokens
	// as doubles, exact below 2^53).
	ErrInvalidToken = errors.New("dlock: invalid token")
	// ErrInvalidUpdate: an Update with a bad table or column name, or a
	// Redis call with an empty key.
	ErrInvalidUpdate = errors.New("dlock: invalid update")
)

// MaxToken is one more than the largest token accepted.
const MaxToken = 1 << 53

func checkToken(token int64) error {
	if token < 1 || token >= MaxToken {
		return fmt.Errorf("%w: %d (want 1..2^53-1)", ErrInvalidToken, token)
	}
	return nil
}

// StaleError is the error of a rejected stale write: Token was offered,
// Seen is the higher token the storage had already accepted. It matches
// ErrStale with errors.Is.
type StaleError struct {
	Token, Seen int64
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("dlock: stale token %d (already saw %d)", e.Token, e.Seen)
}

// wrap names the call op on table or key on err, once: dlock: fence <op>
// "<object>": <reason>.
func wrap(op, object string, err error) error {
	return seam.WrapCall("fence "+op+" "+strconv.Quote(object), err)
}

// Is makes errors.Is(err, ErrStale) true.
func (e *StaleError) Is(target error) bool { return target == ErrStale }
