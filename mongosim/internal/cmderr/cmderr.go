package cmderr

import "fmt"

// Error is a MongoDB command error.
type Error struct {
	Code    int32
	Name    string
	Message string
	Labels  []string
}

func (e *Error) Error() string { return fmt.Sprintf("%s (%d): %s", e.Name, e.Code, e.Message) }

// Common MongoDB error codes used by mongosim.
const (
	BadValue                           = 2
	FailedToParse                      = 9
	TypeMismatch                       = 14
	IllegalOperation                   = 20
	NamespaceNotFound                  = 26
	IndexNotFound                      = 27
	PathNotViable                      = 28
	ConflictingUpdateOperators         = 40
	CursorNotFound                     = 43
	CappedPositionLost                 = 136
	NamespaceExists                    = 48
	DollarPrefixedFieldName            = 52
	InvalidIdField                     = 53
	NotSingleValueField                = 54
	EmptyFieldName                     = 56
	ImmutableField                     = 66
	InvalidOptions                     = 72
	InvalidNamespace                   = 73
	IndexOptionsConflict               = 85
	IndexKeySpecsConflict              = 86
	NotWritablePrimary                 = 10107
	CommandNotFound                    = 59
	NoSuchKey                          = 4
	Unauthorized                       = 13
	AuthenticationFailed               = 18
	OperationFailed                    = 96
	WriteConcernFailed                 = 64
	HostUnreachable                    = 6
	HostNotFound                       = 7
	NetworkTimeout                     = 89
	ShutdownInProgress                 = 91
	PrimarySteppedDown                 = 189
	InterruptedAtShutdown              = 11600
	InterruptedDueToReplState          = 11602
	NotPrimaryNoSecondaryOk            = 13435
	NotPrimaryOrSecondary              = 13436
	SocketException                    = 9001
	ExceededTimeLimit                  = 262
	TransactionTooOld                  = 225
	NoSuchTransaction                  = 251
	IncompleteTransactionHist          = 217
	DuplicateKey                       = 11000
	Location40324                      = 40324
	Location15955                      = 15955
	InvalidPipelineOperator            = 168
	NotImplemented                     = 238
	IngressRequestRateLimitExceeded    = 462
	MaxTimeMSExpired                   = 50
	Interrupted                        = 11601
	JSInterpreterFailure               = 139
	OperationNotSupportedInTransaction = 263
	InvalidLength                      = 16
	Overflow                           = 15
	UnknownError                       = 8
	BSONObjectTooLarge                 = 10334
	UnsatisfiableWriteConcern          = 100
	UnknownReplWriteConcern            = 79
	NotAReplicaSet                     = 123
	SnapshotTooOld                     = 239
	SnapshotUnavailable                = 246
	WriteConflict                      = 112
	TransactionCommitted               = 256
	ConflictingOperationInProgress     = 117
	PreparedTransactionInProgress      = 267
)

var names = map[int32]string{
	BadValue: "BadValue", FailedToParse: "FailedToParse", TypeMismatch: "TypeMismatch",
	IllegalOperation: "IllegalOperation", NamespaceNotFound: "NamespaceNotFound",
	IndexNotFound: "IndexNotFound", PathNotViable: "PathNotViable",
	ConflictingUpdateOperators: "ConflictingUpdateOperators", CursorNotFound: "CursorNotFound",
	NamespaceExists: "NamespaceExists", DollarPrefixedFieldName: "DollarPrefixedFieldName",
	InvalidIdField: "InvalidIdField", NotSingleValueField: "NotSingleValueField",
	EmptyFieldName: "EmptyFieldName", ImmutableField: "ImmutableField",
	InvalidOptions: "InvalidOptions", InvalidNamespace: "InvalidNamespace",
	IndexOptionsConflict: "IndexOptionsConflict", IndexKeySpecsConflict: "IndexKeySpecsConflict",
	NotWritablePrimary: "NotWritablePrimary", CommandNotFound: "CommandNotFound",
	NoSuchKey: "NoSuchKey", Unauthorized: "Unauthorized", AuthenticationFailed: "AuthenticationFailed",
	OperationFailed: "OperationFailed", WriteConcernFailed: "WriteConcernFailed",
	HostUnreachable: "HostUnreachable", HostNotFound: "HostNotFound", NetworkTimeout: "NetworkTimeout",
	ShutdownInProgress: "ShutdownInProgress", PrimarySteppedDown: "PrimarySteppedDown",
	InterruptedAtShutdown: "InterruptedAtShutdown", InterruptedDueToReplState: "InterruptedDueToReplStateChange",
	NotPrimaryNoSecondaryOk: "NotPrimaryNoSecondaryOk", NotPrimaryOrSecondary: "NotPrimaryOrSecondary",
	SocketException: "SocketException", ExceededTimeLimit: "ExceededTimeLimit",
	TransactionTooOld: "TransactionTooOld", NoSuchTransaction: "NoSuchTransaction",
	IncompleteTransactionHist: "IncompleteTransactionHistory", DuplicateKey: "DuplicateKey",
	Location40324: "Location40324", Location15955: "Location15955",
	InvalidPipelineOperator: "InvalidPipelineOperator", NotImplemented: "NotImplemented",
	IngressRequestRateLimitExceeded: "IngressRequestRateLimitExceeded",
	MaxTimeMSExpired:                "MaxTimeMSExpired", Interrupted: "Interrupted", JSInterpreterFailure: "JSInterpreterFailure",
	OperationNotSupportedInTransaction: "OperationNotSupportedInTransaction",
	InvalidLength:                      "InvalidLength", Overflow: "Overflow", UnknownError: "UnknownError",
	BSONObjectTooLarge: "BSONObjectTooLarge", CappedPositionLost: "CappedPositionLost",
	// change streams
	47: "NoMatchingDocument", 63: "StaleShardVersion", 133: "FailedToSatisfyReadPreference",
	150: "StaleEpoch", 234: "RetryChangeStream", 260: "InvalidResumeToken",
	280: "ChangeStreamFatalError", 286: "ChangeStreamHistoryLost", 13388: "StaleConfig",
	UnsatisfiableWriteConcern: "UnsatisfiableWriteConcern",
	UnknownReplWriteConcern:   "UnknownReplWriteConcern", NotAReplicaSet: "NotAReplicaSet", SnapshotTooOld: "SnapshotTooOld", SnapshotUnavailable: "SnapshotUnavailable",
	WriteConflict: "WriteConflict", TransactionCommitted: "TransactionCommitted", ConflictingOperationInProgress: "ConflictingOperationInProgress",
	PreparedTransactionInProgress: "PreparedTransactionInProgress",
}

// Name returns the codeName MongoDB uses for code, or "Location<code>".
func Name(code int32) string {
	if n, ok := names[code]; ok {
		return n
	}
	return fmt.Sprintf("Location%d", code)
}

// New returns an Error with code's name and a formatted message.
func New(code int32, format string, args ...any) *Error {
	return &Error{Code: code, Name: Name(code), Message: fmt.Sprintf(format, args...)}
}

// Unsupported reports a feature mongosim does not implement, naming it, so
// that nothing is ever silently answered wrong.
func Unsupported(what string) *Error {
	return New(NotImplemented, "mongosim does not support %s", what)
}
