package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/cmd/docket/tlsgen"
)

// stringList is a repeatable flag that also takes comma-separated values.
type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error {
	*s = append(*s, splitList(v)...)
	return nil
}

// runTLS is `docket tls ca` and `docket tls cert`: the one-command path to a
// CA and the certificates it signs (after Consul's and Nomad's `tls`).
func runTLS(_ context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: docket tls ca|cert [flags]", errUsage)
	}
	fs := flag.NewFlagSet("tls "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", ".", "directory that holds the CA and receives the new files")
	days := fs.Int("days", 0, "validity in days (default: CA 1825, certificate 365)")
	switch args[0] {
	case "ca":
		if err := parseFlags(fs, args[1:]); err != nil {
			return err
		}
		cert, key, err := tlsgen.CA(*dir, *days)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s and %s (keep the key offline: it signs nodes)\n", cert, key)
		return nil
	case "cert":
		server := fs.Bool("server", false, "a node's certificate (server and client use, DNS name "+tlsgen.ServerName+")")
		clientCert := fs.Bool("client", false, "a client's certificate (client use only)")
		name := fs.String("name", "", "file stem: NAME.pem and NAME-key.pem (default server or client)")
		var dns, ips stringList
		fs.Var(&dns, "dns", "extra DNS name (repeatable or comma-separated)")
		fs.Var(&ips, "ip", "extra IP address (repeatable or comma-separated)")
		if err := parseFlags(fs, args[1:]); err != nil {
			return err
		}
		if *server == *clientCert {
			return fmt.Errorf("%w: docket tls cert needs exactly one of --server, --client", errUsage)
		}
		o := tlsgen.CertOptions{Dir: *dir, Name: *name, Server: *server, DNS: dns, Days: *days}
		for _, s := range ips {
			ip := net.ParseIP(s)
			if ip == nil {
				return fmt.Errorf("%w: --ip %q is not an IP address", errUsage, s)
			}
			o.IPs = append(o.IPs, ip)
		}
		cert, key, err := tlsgen.Cert(o)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s and %s\n", cert, key)
		return nil
	}
	return fmt.Errorf("%w: docket tls ca|cert, not %q", errUsage, args[0])
}

// tlsFiles are a client's --tls-ca, --tls-cert and --tls-key, shared by
// every verb and `docket bench`.
type tlsFiles struct{ ca, cert, key string }

func (t *tlsFiles) flags(fs *flag.FlagSet) {
	fs.StringVar(&t.ca, "tls-ca", os.Getenv("DOCKET_TLS_CA"), "PEM file of the cluster CA: speak TLS and check the nodes' certificates (env DOCKET_TLS_CA)")
	fs.StringVar(&t.cert, "tls-cert", os.Getenv("DOCKET_TLS_CERT"), "PEM file of a client certificate, for nodes that ask for one (env DOCKET_TLS_CERT)")
	fs.StringVar(&t.key, "tls-key", os.Getenv("DOCKET_TLS_KEY"), "PEM file of the client certificate's key (env DOCKET_TLS_KEY)")
}

// options are the client options the flags ask for: none without a CA.
// A certificate without a CA is refused by client.WithTLS at New.
func (t *tlsFiles) options() []client.Option {
	if t.ca == "" && t.cert == "" && t.key == "" {
		return nil
	}
	return []client.Option{client.WithTLS(t.ca, t.cert, t.key)}
}
