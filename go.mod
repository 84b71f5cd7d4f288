module github.com/sturdy-go/sturdy

go 1.25.0

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/cockroachdb/apd/v3 v3.2.3
	github.com/dop251/goja v0.0.0-20260917113740-793a2a65c13b
	github.com/golang/geo v0.0.0-20260818125358-b200a1149890
	github.com/klauspost/compress v1.20.3
	github.com/kljensen/snowball v0.10.0
	github.com/xdg-go/scram v1.4.0
	go.mongodb.org/mongo-driver/v2 v2.10.0
	go.uber.org/goleak v1.3.0
	golang.org/x/net v0.57.0
	golang.org/x/text v0.41.0
)

require (
	github.com/dlclark/regexp2/v2 v2.5.2 // indirect
	github.com/go-sourcemap/sourcemap v2.1.3+incompatible // indirect
	github.com/google/pprof v0.0.0-20230207041349-798e818bf904 // indirect
	github.com/xdg-go/stringprep v1.0.4 // indirect
	github.com/youmark/pkcs8 v0.0.0-20240726163527-a2c0da244d78 // indirect
	golang.org/x/crypto v0.54.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
)
