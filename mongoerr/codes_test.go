package mongoerr

import "testing"

// The code sets are what the SDAM, retryable writes and retryable reads
// specifications list; a code moved between them changes driver behaviour.
func TestCodeSets(t *testing.T) {
	for _, c := range []int32{11600, 11602, 10107, 13435, 13436, 189, 91, 7, 6, 89, 9001} {
		if !IsRetryableWriteCode(c) || !IsRetryableReadCode(c) {
			t.Errorf("%d must be retryable for writes and reads", c)
		}
	}
	for _, c := range []int32{262, 134} {
		if IsRetryableWriteCode(c) || !IsRetryableReadCode(c) {
			t.Errorf("%d is retryable for reads only", c)
		}
	}
	for _, c := range []int32{64, 11000, 50, 10058} {
		if IsRetryableWriteCode(c) || IsRetryableReadCode(c) {
			t.Errorf("%d must not be retryable", c)
		}
	}
	for _, c := range []int32{11600, 11602, 13436, 189, 91} {
		if !IsRecoveringCode(c) || IsNotWritablePrimaryCode(c) {
			t.Errorf("%d is a recovering code", c)
		}
	}
	for _, c := range []int32{10107, 13435, 10058} {
		if IsRecoveringCode(c) || !IsNotWritablePrimaryCode(c) {
			t.Errorf("%d is a not-writable-primary code", c)
		}
	}
	if !IsShutdownCode(91) || !IsShutdownCode(11600) || IsShutdownCode(11602) {
		t.Error("shutdown codes are 91 and 11600")
	}
	if !IsDuplicateKeyCode(11000) || !IsDuplicateKeyCode(11001) || !IsDuplicateKeyCode(12582) || IsDuplicateKeyCode(11002) {
		t.Error("duplicate-key codes are 11000, 11001, 12582")
	}
}
