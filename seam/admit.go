package seam

// Mode is what a place in a lock's line asks of the lock: the rule of
// what a grant needs is Admission's, the same for every shape and every
// backend that evaluates it over a listing of the line.
type Mode uint8

const (
	// Exclusive: the lock alone (a Mutex, a Lock, a FairLock, a MultiLock
	// member, an RWLock's write side). It waits for every place ahead of
	// it, and for a Downgrade anywhere but under its own hold.
	Exclusive Mode = iota
	// Shared: beside other Shared places (an RWLock's read side). It waits
	// for the places ahead of it that are not Shared, but for its owner's
	// own Exclusive hold (it reads under it); a writer ahead of it that
	// waits holds it back too, so readers cannot starve writers.
	Shared
	// Permit: one of a Semaphore's permits. It holds while fewer than the
	// permit count are ahead of it.
	Permit
	// Downgrade: Shared, taken under its owner's own Exclusive hold. It
	// holds at once, and an Exclusive place queued ahead of it (but the
	// hold it was taken under) waits for it.
	Downgrade
)

// Other is another place in the line, as Admission sees it.
type Other struct {
	Mode Mode
	// Ahead: it was queued before the place (a holder is ahead of every
	// waiter).
	Ahead bool
	// Own: it is the place's owner's own hold, which the place does not
	// wait for: the Exclusive hold a Shared place reads under, or the
	// Downgrade taken under an Exclusive hold.
	Own bool
}

// Admission applies the rule of a grant to one place, over the other
// places of its line, in any order: Admit, See each, then Granted. The
// places it waits for are those See reported in its way.
type Admission struct {
	mode    Mode
	permits int  // a Permit's count
	ahead   int  // the permits ahead of a Permit
	blocked bool // something is in the way
}

// Admit starts the admission of a place of mode m; permits is a
// Semaphore's count (for a Permit).
func Admit(m Mode, permits int) Admission { return Admission{mode: m, permits: permits} }

// See takes o into account and reports whether o is in the place's way:
// one it waits for (for a Permit: one of the permits ahead of it).
func (a *Admission) See(o Other) (inWay bool) {
	switch a.mode {
	case Downgrade:
		return false
	case Exclusive:
		inWay = o.Ahead || o.Mode == Downgrade && !o.Own
	case Shared:
		inWay = o.Ahead && o.Mode != Shared && o.Mode != Downgrade && !o.Own
	case Permit:
		if o.Ahead && o.Mode == Permit {
			a.ahead++
			return true
		}
		inWay = o.Ahead
	}
	a.blocked = a.blocked || inWay
	return inWay
}

// Granted reports whether the place holds the lock, given the places seen.
func (a *Admission) Granted() bool {
	return !a.blocked && (a.mode != Permit || a.ahead < a.permits)
}
