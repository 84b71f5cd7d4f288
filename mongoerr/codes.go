package mongoerr

import "slices"

// Server error codes the client acts on, named as the server's codeName.
// Every code list of the client is built from these, here and only here.
const (
	CodeHostUnreachable                    int32 = 6
	CodeHostNotFound                       int32 = 7
	CodeIllegalOperation                   int32 = 20
	CodeNamespaceNotFound                  int32 = 26
	CodeCursorNotFound                     int32 = 43
	CodeMaxTimeMSExpired                   int32 = 50
	CodeCommandNotFound                    int32 = 59
	CodeWriteConcernFailed                 int32 = 64
	CodeUnknownReplWriteConcern            int32 = 79
	CodeUnsatisfiableWriteConcern          int32 = 100
	CodeNetworkTimeout                     int32 = 89
	CodeShutdownInProgress                 int32 = 91
	CodeReadConcernMajorityNotAvailableYet int32 = 134
	CodePrimarySteppedDown                 int32 = 189
	CodeExceededTimeLimit                  int32 = 262
	CodeSocketException                    int32 = 9001
	CodeLegacyNotPrimary                   int32 = 10058
	CodeNotWritablePrimary                 int32 = 10107
	CodeDuplicateKey                       int32 = 11000
	CodeDuplicateKeyLegacy                 int32 = 11001 // pre-2.6 servers
	CodeInterruptedAtShutdown              int32 = 11600
	CodeInterruptedDueToReplStateChange    int32 = 11602
	CodeDuplicateKeyUpdateLegacy           int32 = 12582 // pre-2.6 servers, update path
	CodeNotPrimaryNoSecondaryOk            int32 = 13435
	CodeNotPrimaryOrSecondary              int32 = 13436
)

// The Server Discovery and Monitoring specification's "node is recovering"
// and "not writable primary" codes, and the shutdown subset of them.
var (
	recoveringCodes = []int32{CodeInterruptedAtShutdown, CodeInterruptedDueToReplStateChange,
		CodeNotPrimaryOrSecondary, CodePrimarySteppedDown, CodeShutdownInProgress}
	notWritablePrimaryCodes = []int32{CodeNotWritablePrimary, CodeNotPrimaryNoSecondaryOk, CodeLegacyNotPrimary}
	shutdownCodes           = []int32{CodeInterruptedAtShutdown, CodeShutdownInProgress}
)

// retryableWriteCodes are the Retryable Writes specification's codes, which
// decide for servers before 4.4 (newer servers label their errors); they
// mean the primary went away or the network failed on the server's side.
var retryableWriteCodes = []int32{CodeInterruptedAtShutdown, CodeInterruptedDueToReplStateChange,
	CodeNotWritablePrimary, CodeNotPrimaryNoSecondaryOk, CodeNotPrimaryOrSecondary, CodePrimarySteppedDown,
	CodeShutdownInProgress, CodeHostNotFound, CodeHostUnreachable, CodeNetworkTimeout, CodeSocketException}

// retryableReadCodes are the Retryable Reads specification's codes: the
// write codes plus ExceededTimeLimit and ReadConcernMajorityNotAvailableYet.
var retryableReadCodes = append([]int32{CodeExceededTimeLimit, CodeReadConcernMajorityNotAvailableYet},
	retryableWriteCodes...)

// IsRetryableWriteCode reports whether code is one of the Retryable Writes
// specification's retryable codes.
func IsRetryableWriteCode(code int32) bool { return slices.Contains(retryableWriteCodes, code) }

// IsRetryableReadCode reports whether code is one of the Retryable Reads
// specification's retryable codes.
func IsRetryableReadCode(code int32) bool { return slices.Contains(retryableReadCodes, code) }

// IsRecoveringCode reports whether code means "node is recovering".
func IsRecoveringCode(code int32) bool { return slices.Contains(recoveringCodes, code) }

// IsNotWritablePrimaryCode reports whether code means "not writable primary".
func IsNotWritablePrimaryCode(code int32) bool { return slices.Contains(notWritablePrimaryCodes, code) }

// IsShutdownCode reports whether code means the server is shutting down.
func IsShutdownCode(code int32) bool { return slices.Contains(shutdownCodes, code) }

// IsDuplicateKeyCode reports whether code is a duplicate-key error.
func IsDuplicateKeyCode(code int32) bool {
	return code == CodeDuplicateKey || code == CodeDuplicateKeyLegacy || code == CodeDuplicateKeyUpdateLegacy
}
