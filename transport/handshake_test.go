package transport

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/dockethq/docket/internal/testwait"
)

// selfSigned is a throwaway server certificate.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"test"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// serveHandshakes accepts on a loopback listener and runs creds' server
// handshake on each connection, each bounded by a 3 s deadline as gRPC's
// ConnectionTimeout bounds it.
func serveHandshakes(t *testing.T, creds credentials.TransportCredentials) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(3 * time.Second))
				conn, _, err := creds.ServerHandshake(c)
				if err == nil {
					_, _ = io.Copy(io.Discard, conn)
				}
			}()
		}
	}()
	return l.Addr().String()
}

// With one handshake slot, a client that sends its ClientHello and then
// stalls holds no slot while the server waits on it: a second client
// completes its handshake at once. A slot held for the whole handshake
// would keep the second client waiting for the first's deadline (3 s).
func Test_HandshakeSlotFreeWhileWaitingOnPeer(t *testing.T) {
	cert := selfSigned(t)
	creds := limitHandshakes(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}}), 1, 5*time.Second)
	addr := serveHandshakes(t, creds)
	cfg := &tls.Config{InsecureSkipVerify: true, ServerName: "test"}

	for i := 0; i < 3; i++ { // three stalled peers
		stalled, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = stalled.Close() })
		rec := &helloConn{}
		_ = tls.Client(rec, cfg).Handshake() // records the ClientHello
		if _, err := stalled.Write(rec.b); err != nil {
			t.Fatal(err)
		}
		// The server's flight arrives: it has computed and now waits.
		_ = stalled.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := stalled.Read(make([]byte, 1)); err != nil {
			t.Fatalf("no server flight: %v", err)
		}
	}

	start := time.Now()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	if d := time.Since(start); d > time.Second {
		t.Fatalf("a handshake took %v behind stalled peers", d)
	}
	// The server's side ends just after the client's: then no slot is held.
	testwait.For(t, 10*time.Second, "no handshake slot held by stalled peers", func() bool { return len(creds.(*handshakeCreds).slots) == 0 })
}

// helloConn is a net.Conn that keeps what is written and reads EOF.
type helloConn struct {
	net.Conn
	b []byte
}

func (r *helloConn) Write(p []byte) (int, error)      { r.b = append(r.b, p...); return len(p), nil }
func (r *helloConn) Read([]byte) (int, error)         { return 0, io.EOF }
func (r *helloConn) SetDeadline(time.Time) error      { return nil }
func (r *helloConn) SetReadDeadline(time.Time) error  { return nil }
func (r *helloConn) SetWriteDeadline(time.Time) error { return nil }
