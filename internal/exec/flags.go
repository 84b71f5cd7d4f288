package exec

// Flags say which rules apply to an Operation: how its server is selected,
// which retry rules it falls under, and what it does with its session and
// connection. The zero value is a read with none of the retry rules.
type Flags uint16

const (
	// Write selects a writable server; otherwise ReadPref applies.
	Write Flags = 1 << iota
	// WriteStage marks an aggregate whose pipeline ends in $out or $merge
	// (with Write set). Per the CRUD spec such a write may run on a
	// secondary: a non-primary ReadPref is used for selection and sent as
	// $readPreference when every available server is 5.0+ (wire version
	// 13) or none is available; otherwise a writable server is selected.
	WriteStage
	// RetryableWrite marks a write command eligible for a transaction
	// number (the Retryable Writes spec's whitelist, judged per command
	// after batch splitting): it is sent when Executor.RetryWrites is set
	// and the selected server supports retryable writes.
	RetryableWrite
	// RetryableRead marks a read eligible for the retryable-reads retry
	// (find, aggregate without a write stage, distinct, count, the list
	// commands); getMore and runCommand are not.
	RetryableRead
	// RunCommand marks a generic command the client knows nothing about:
	// never a retryable write or read, and retried after overload errors
	// only when both RetryWrites and RetryReads are on.
	RunCommand
	// Unacknowledged is a w:0 write: sent with moreToCome, no reply read,
	// and never with a session id.
	Unacknowledged
	// KeepSession keeps the implicit session alive past Execute (for a
	// cursor): Result.Session must then be ended by the caller.
	KeepSession
	// TxnCommand marks commitTransaction and abortTransaction (with an
	// explicit Session): sent with the transaction's fields and its
	// recoveryToken, keeping the command's writeConcern, and retried as
	// a retryable write whether or not RetryWrites is set.
	TxnCommand
	// MajorityCommit makes a commitTransaction send w:majority (and
	// wtimeout 10000 unless the write concern has one) from its first
	// attempt: the application is committing again.
	MajorityCommit
	// PinCursor marks a cursor-opening command: in load-balanced mode a
	// reply with a cursor id keeps the connection checked out, pinned
	// (Result.Pin), for the cursor's getMores and killCursors.
	PinCursor
	// RecycleReply reads the reply into a pooled buffer that
	// Result.ReplyBuffer hands to the caller, who gives it back
	// (bufpool.Put) once nothing refers into the reply: a cursor done with
	// its batch.
	RecycleReply
)

// Has reports whether every flag of g is set in f.
func (f Flags) Has(g Flags) bool { return f&g == g }

// If returns f when cond holds, else no flags.
func (f Flags) If(cond bool) Flags {
	if cond {
		return f
	}
	return 0
}
