// Package diskfull is the disk-full test of the agent: the real
// contiv-agent binary (tests/testenv) runs with its bolt file (bolt.conf
// db-path) on a small tmpfs that the test mounts, a ballast file fills
// the tmpfs, and 16 concurrent clients call Add over the agent's gRPC
// socket (the RemoteCNI service of plugins/podmanager/cni), each with new
// keys, until Adds fail for want of space. TestDiskFull then checks, in
// this order:
//
//  1. every failed Add was answered, with code 100 (the change is not
//     durable, the allocation undone) or 11 (try again later);
//  2. right after a round of 16 Adds that all failed, before the agent's
//     next store probe, /readiness answers 503 and names IPAM's reason,
//     "the pod allocations cannot be stored";
//  3. no failed Add holds an address (GET /contiv/v1/ipam/allocations
//     lacks its key, and CHECK without prevResult answers code 103, no
//     allocation); every acknowledged Add holds its address (allocations,
//     and CHECK with it as prevResult passes); no address is held twice;
//  4. with a round of failed Adds just before, the ballast is removed and
//     /readiness answers 200 within 10 s without any further Add (the
//     agent writes a probe key every 2 s while the store fails);
//  5. two rounds of 16 concurrent Adds, like the one that failed last,
//     are all acknowledged;
//  6. after a SIGKILL and a restart on the same tmpfs, check 3 holds for
//     every Add of the test; the agent's log has no panic or fatal line.
//
// One thing is seen, not required, and logged as a figure: the probe is
// a single small write, which bolt places in pages it freed inside its
// file, so it may succeed, and the agent turn ready, while the disk is
// still full; the next Add that needs new pages fails again. The test
// therefore checks readiness right after failed Adds (2, 4), not over
// the whole time the ballast is there.
//
// tmpfs.go holds the file system: MountTmpfs, Fill (the ballast), Drain
// and Free; the clients and the tests live in the _test.go files.
// TestTmpfsFillAndDrain checks the ballast itself: it leaves the room
// asked for, a write past it fails with ENOSPC, Drain frees the space.
//
// Owners: a Tmpfs belongs to the test goroutine that mounted it. A client
// runs on its own goroutine during a round or the fill and is read by the
// test goroutine only after every client of it has returned (a WaitGroup
// orders the two).
//
// Caller duties:
//
//  1. Run as root on Linux (the tmpfs mount needs CAP_SYS_ADMIN): the test
//     fails, saying so, otherwise.
//  2. Call testenv.Main from TestMain (it builds the binaries).
//  3. Call MountTmpfs before starting an agent on the tmpfs: its cleanup,
//     registered first, unmounts after the agent's, which kills it.
//
// `go test ./tests/diskfull/` takes about 7 s after the build.
package diskfull
