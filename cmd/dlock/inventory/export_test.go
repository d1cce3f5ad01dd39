package inventory

// Test hooks.

// SetSection makes a lock or fenced strategy call enter(sku) when its
// critical section starts and the returned func when it ends.
func SetSection(s Strategy, enter func(sku string) func()) {
	switch s := s.(type) {
	case *Locked:
		s.section = enter
	case *Fenced:
		s.section = enter
	}
}

// SetAfterApply makes c call f between an entry's SQL commit and its XACK.
func SetAfterApply(c *Consumer, f func(id string)) { c.afterApply = f }
