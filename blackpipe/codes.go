package blackpipe

// codeNames maps the server error codes tests commonly script to their
// codeName, as a server reports them.
var codeNames = map[int32]string{
	1:     "InternalError",
	2:     "BadValue",
	6:     "HostUnreachable",
	7:     "HostNotFound",
	8:     "UnknownError",
	9:     "FailedToParse",
	11:    "UserNotFound",
	13:    "Unauthorized",
	18:    "AuthenticationFailed",
	26:    "NamespaceNotFound",
	43:    "CursorNotFound",
	48:    "NamespaceExists",
	50:    "MaxTimeMSExpired",
	59:    "CommandNotFound",
	64:    "WriteConcernFailed",
	79:    "UnknownReplWriteConcern",
	89:    "NetworkTimeout",
	91:    "ShutdownInProgress",
	100:   "UnsatisfiableWriteConcern",
	112:   "WriteConflict",
	115:   "CommandNotSupported",
	134:   "ReadConcernMajorityNotAvailableYet",
	189:   "PrimarySteppedDown",
	211:   "KeyNotFound",
	225:   "TransactionTooOld",
	251:   "NoSuchTransaction",
	262:   "ExceededTimeLimit",
	391:   "ReauthenticationRequired",
	462:   "IngressRequestRateLimitExceeded",
	9001:  "SocketException",
	10107: "NotWritablePrimary",
	11000: "DuplicateKey",
	11600: "InterruptedAtShutdown",
	11602: "InterruptedDueToReplStateChange",
	13388: "StaleConfig",
	13435: "NotPrimaryNoSecondaryOk",
	13436: "NotPrimaryOrSecondary",
}

// CodeName returns the server's codeName for code, or "" if unknown.
func CodeName(code int32) string { return codeNames[code] }
