package topology

import (
	"os"
	"strings"
)

// streamingEnabled resolves serverMonitoringMode: "stream" and "poll" say
// it outright; "auto" (or "") streams unless the client runs on a FaaS
// platform, where a frozen process would act on a stale stream.
func streamingEnabled(mode string) bool {
	switch mode {
	case "stream":
		return true
	case "poll":
		return false
	}
	return !onFaaS()
}

// onFaaS applies the FaaS detection rules of the handshake spec's client
// metadata section.
func onFaaS() bool {
	set := func(k string) bool { return os.Getenv(k) != "" }
	return strings.HasPrefix(os.Getenv("AWS_EXECUTION_ENV"), "AWS_Lambda_") || set("AWS_LAMBDA_RUNTIME_API") ||
		set("FUNCTIONS_WORKER_RUNTIME") || set("K_SERVICE") || set("FUNCTION_NAME") || set("VERCEL")
}
