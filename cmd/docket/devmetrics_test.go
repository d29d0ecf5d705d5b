package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// checkDevMetrics: every node `docket dev` prints serves Prometheus
// /metrics at the URL printed (HTTPS with the CA and the admin token on
// a secure cluster, which refuses a scrape without it), the env file
// names the same URLs, and node 1 lists the API's services by gRPC
// reflection. caFile and tok are "" for --insecure.
func checkDevMetrics(t *testing.T, dev *devRun, dir, caFile, tok string) {
	t.Helper()
	urls := regexp.MustCompile(`(?m)^  (n\d)  metrics (\S+)$`).FindAllStringSubmatch(dev.out.String(), -1)
	if len(urls) != 3 {
		t.Fatalf("dev printed %d metrics URLs, want 3:\n%s", len(urls), dev.out.String())
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	creds := insecure.NewCredentials()
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			t.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(pem)
		cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS13}
		hc.Transport = &http.Transport{TLSClientConfig: cfg}
		creds = credentials.NewTLS(cfg)
	}
	env, err := os.ReadFile(filepath.Join(dir, DevEnvFile))
	if err != nil {
		t.Fatal(err)
	}
	var printed []string
	for _, u := range urls {
		printed = append(printed, u[2])
		scrape := func(withToken bool) (int, string) {
			req, err := http.NewRequest(http.MethodGet, u[2], nil)
			if err != nil {
				t.Fatal(err)
			}
			if withToken && tok != "" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatalf("%s metrics %s: %v", u[1], u[2], err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("%s metrics: %v", u[1], err)
			}
			return resp.StatusCode, string(b)
		}
		code, body := scrape(true)
		if code != http.StatusOK || !strings.Contains(body, "\ndocket_grpc_connections ") || !strings.Contains(body, "\ngo_goroutines ") {
			t.Fatalf("%s metrics %s: %d, want 200 with docket_grpc_connections:\n%.500s", u[1], u[2], code, body)
		}
		if tok != "" {
			if code, _ := scrape(false); code != http.StatusUnauthorized {
				t.Fatalf("%s metrics without a token: %d, want 401", u[1], code)
			}
		}
	}
	if !strings.Contains(string(env), "DOCKET_METRICS='"+strings.Join(printed, ",")+"'") {
		t.Fatalf("env file lacks DOCKET_METRICS=%s:\n%s", strings.Join(printed, ","), env)
	}

	addr := regexp.MustCompile(`(?m)^  n1  grpc (\S+) `).FindStringSubmatch(dev.out.String())
	if addr == nil {
		t.Fatalf("dev printed no n1 grpc address:\n%s", dev.out.String())
	}
	cc, err := grpc.NewClient(addr[1], grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := reflectionpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatalf("reflection: %v", err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatalf("reflection: %v", err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("reflection list: %v", err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	if !slices.Contains(names, pb.Queue_ServiceDesc.ServiceName) {
		t.Fatalf("reflection lists %v, want %s", names, pb.Queue_ServiceDesc.ServiceName)
	}
}
