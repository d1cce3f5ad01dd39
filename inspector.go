package dlock

// inspector is one shape's answer to Inspect: its inspect script (a
// normalized reply, see lua/inspect_lib.lua) and the keys it reads.
type inspector struct {
	script *luaScript
	keys   func(c *Client, name string) []string
}
