// Package raftlog is the storage beneath a node's Raft: the log's WAL,
// segment files whose append is durable after one fdatasync (WAL; OpenLog
// chooses it or raft.db and moves a log from raft.db into it), the BoltDB
// file that holds Raft's stable state (OpenBolt), the leader's queued log
// writes (QueuedLog), and the reserve that keeps Raft's own writes possible
// on a full disk (Reserve).
//
// QueuedLog is the raft.LogStore beneath Raft's log cache. A follower's writes
// go through it synchronously; a leader's are queued and written by one
// goroutine, several rounds in one transaction, so that the leader writes
// its log while the followers write theirs. Raft then counts the leader's
// copy toward a quorum before it is on disk, so two gates hold back what
// that would expose: GatedFSM applies an entry only once the leader's copy
// is written, and CappedTransport lowers the commit index the leader sends
// below the first entry it has not written. An entry is therefore applied,
// answered or read only once the leader and enough followers to make a
// quorum with it hold it on disk.
//
// A queued write that fails for want of space is retried until there is
// room (Stalled and Changed report it, and the cluster package then
// refuses new calls and hands leadership over); one that fails otherwise
// stops the node, since Raft has sent and counted those entries. Over the
// WAL the log counts as stalled a little earlier, when the WAL cannot keep
// its margin of room written ahead (SetSpaceCheck, WAL.EnsureMargin), while the
// queued writes go on into it. Reserve
// is a file of a few MiB in the data dir, given back when Raft's term or
// vote cannot be written for want of space (ReservedStable), so that
// Raft, which panics on such a failure, goes on.
//
// The one older form read is a log in raft.db, which OpenLog moves into
// the WAL (open.go: migrateBolt); nothing else is read in an older form.
package raftlog
