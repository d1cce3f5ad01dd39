// Package faults is dlock's fault suite: tests that run the Redis core
// against real redis-server processes while the network (an in-process
// toxiproxy) or the processes (SIGSTOP, SIGKILL, CLIENT PAUSE, DEBUG SLEEP,
// FLUSHALL, a Sentinel failover) misbehave, record what every client saw
// (History), and check the record with porcupine (Check) instead of by eye.
//
// The package itself holds the helpers (Proxy, History, the models and
// their checks: CheckMutex, CheckFenced, CheckTokens, DoubleGrants), which
// the soak drill (dlock drill soak) runs over its histories too; the tests
// are in package faults_test. Run them with
//
//	cd faults && go test -race ./...
//
// and add -v to see the figures each test measured (lines starting with
// "figures:" carry JSON).
package faults
