package connstring

import (
	"errors"
	"testing"
)

// FuzzParse: on any string Parse does not panic, and either fails with a
// *Error that says something or returns a connection string that is whole:
// a mongodb URI has hosts (each named, with a port in range and a dialable
// address) and no SRV name; a mongodb+srv URI has the SRV name and no
// hosts until Resolve.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"mongodb://localhost",
		"mongodb://a:27017,b:27018/db?replicaSet=rs0&w=majority&retryWrites=false",
		"mongodb://user:p%40ss@[::1]:27017/admin?authMechanism=SCRAM-SHA-256&authSource=admin",
		"mongodb://%2Ftmp%2Fmongodb-27017.sock/?directConnection=true",
		"mongodb+srv://cluster0.example.com/?tls=false&srvMaxHosts=2",
		"mongodb://h/?readPreference=secondary&readPreferenceTags=dc:ny,rack:1&readPreferenceTags=&maxStalenessSeconds=120",
		"mongodb://h/?compressors=zstd,zlib,snappy&zlibCompressionLevel=9&timeoutMS=0&socketTimeoutMS=5",
		"mongodb://h/?authMechanism=MONGODB-X509&tlsCertificateKeyFile=x.pem&tls=true",
		"mongodb://h:99999",
		"mongodb://@h",
		"mongodb://h/?w=1&journal=true&wtimeoutMS=-1",
		"mongodb://h/?loadBalanced=true&directConnection=true",
		"mongodb://h/?appname=%ZZ",
		"mongodb:///",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		cs, err := Parse(uri)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) || pe.Msg == "" {
				t.Fatalf("%q: %T %v, want a *Error that says what is wrong", uri, err, err)
			}
			if cs != nil {
				t.Fatalf("%q: a connection string with the error %v", uri, err)
			}
			return
		}
		switch cs.Scheme {
		case SchemeMongoDB:
			if len(cs.Hosts) == 0 || cs.SRVHost != "" {
				t.Fatalf("%q: hosts %v, SRV name %q", uri, cs.Hosts, cs.SRVHost)
			}
		case SchemeSRV:
			if len(cs.Hosts) != 0 || cs.SRVHost == "" {
				t.Fatalf("%q: SRV URI with hosts %v, SRV name %q", uri, cs.Hosts, cs.SRVHost)
			}
		default:
			t.Fatalf("%q: scheme %q", uri, cs.Scheme)
		}
		for _, h := range cs.Hosts {
			if h.Name == "" || h.Port < 0 || h.Port > 65535 || h.Address() == "" {
				t.Fatalf("%q: host %+v", uri, h)
			}
		}
	})
}
