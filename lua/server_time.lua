-- server_time.lua: the time of the server that holds a key (Inspect).
--
-- KEYS[1]  any key: it only routes the call to that key's node (Cluster)
--
-- Returns the server time in milliseconds
return server_ms()
