package dlock

// FenceKey returns the fence counter key of the lock name under the default
// prefix: the counter of its hash slot.
func FenceKey(name string) string {
	return DefaultPrefix + "fence:{" + slotTag(keySlot(DefaultPrefix+"{"+name+"}")) + "}"
}
