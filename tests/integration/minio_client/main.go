// zest-minio-client drives an S3 endpoint with minio-go, the library MinIO's warp benchmark is
// built on, and checks each answer against what AWS S3 does. One line per case: `PASS name` or
// `FAIL name: reason`; the exit status is 1 when any case failed, 2 on a usage error.
//
// minio-go's defaults are left alone on purpose (path-style for a non-AWS host, the
// ?location= lookup, streaming signatures over HTTP, UNSIGNED-PAYLOAD over TLS, multipart from
// 16 MiB with CRC32C part checksums): the point is to see what a real client sends.
//
// Built by tests/integration/meson.build in GOPATH mode against Debian's
// golang-github-minio-minio-go-v7-dev; run by tests/integration/test_minio_go.py.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

type env struct {
	ctx    context.Context
	mc     *minio.Client
	bucket string
}

type testCase struct {
	name string
	run  func(e *env, name string) error
}

func caseNames() []string {
	var names []string
	for _, c := range cases {
		names = append(names, c.name)
	}
	return names
}

func pick(list string) ([]testCase, error) {
	if list == "all" {
		return cases, nil
	}
	byName := map[string]testCase{}
	for _, c := range cases {
		byName[c.name] = c
	}
	var out []testCase
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		c, ok := byName[n]
		if !ok {
			return nil, fmt.Errorf("unknown case %q (cases: %s)", n, strings.Join(caseNames(), " "))
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no case named")
	}
	return out, nil
}

// ensureBucket creates the bucket the way warp does: BucketExists (HEAD), then MakeBucket.
func ensureBucket(e *env) error {
	ok, err := e.mc.BucketExists(e.ctx, e.bucket)
	if err != nil {
		return fmt.Errorf("BucketExists: %v", err)
	}
	if ok {
		return nil
	}
	if err := e.mc.MakeBucket(e.ctx, e.bucket, minio.MakeBucketOptions{}); err != nil {
		return fmt.Errorf("MakeBucket: %v", err)
	}
	return nil
}

func main() {
	endpoint := flag.String("endpoint", "", "host:port of the S3 endpoint (required)")
	access := flag.String("access-key", "", "access key (required)")
	secret := flag.String("secret-key", "", "secret key (required)")
	useTLS := flag.Bool("tls", false, "HTTPS; the certificate is not verified")
	region := flag.String("region", "", "region; empty lets minio-go ask GET ?location= as warp does")
	bucket := flag.String("bucket", "minio-go-test", "bucket, created when missing")
	list := flag.String("cases", "all", "comma-separated case names, or all")
	trace := flag.Bool("trace", false, "print every HTTP request and reply head to stderr")
	timeout := flag.Duration("timeout", 10*time.Minute, "deadline for the whole run")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: %s -endpoint host:port -access-key K -secret-key S [flags]\n"+
			"cases: %s\n", os.Args[0], strings.Join(caseNames(), " "))
		flag.PrintDefaults()
	}
	flag.Parse()
	if *endpoint == "" || *access == "" || *secret == "" || flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	todo, err := pick(*list)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}

	tr, err := minio.DefaultTransport(*useTLS)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if *useTLS {
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} // self-signed test cert
	}
	mc, err := minio.New(*endpoint, &minio.Options{
		Creds:     credentials.NewStaticV4(*access, *secret, ""),
		Secure:    *useTLS,
		Region:    *region,
		Transport: http.RoundTripper(tr),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if *trace {
		mc.TraceOn(os.Stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	e := &env{ctx: ctx, mc: mc, bucket: *bucket}
	if err := ensureBucket(e); err != nil {
		fmt.Printf("FAIL setup: %v\n", err)
		os.Exit(1)
	}

	var failed []string
	for _, c := range todo {
		t0 := time.Now()
		if err := c.run(e, c.name); err != nil {
			fmt.Printf("FAIL %s: %s\n", c.name, oneLine(err))
			failed = append(failed, c.name)
		} else {
			fmt.Printf("PASS %s (%.1fs)\n", c.name, time.Since(t0).Seconds())
		}
	}
	sort.Strings(failed)
	fmt.Printf("%d passed, %d failed %s\n", len(todo)-len(failed), len(failed),
		strings.Join(failed, " "))
	if len(failed) > 0 {
		os.Exit(1)
	}
}

// oneLine keeps a case's report on one line, with the S3 error code when there is one.
func oneLine(err error) string {
	s := err.Error()
	var r minio.ErrorResponse
	if errors.As(err, &r) && r.Code != "" {
		s = fmt.Sprintf("%s [S3 %s, HTTP %d]", s, r.Code, r.StatusCode)
	}
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 600 {
		s = s[:600] + "..."
	}
	return s
}
