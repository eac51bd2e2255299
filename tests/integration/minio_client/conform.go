package main

// conformCase: issue 26's conformance points as minio-go meets them (test_s3_conform.py runs
// it): non-ASCII user metadata comes back as an RFC 2047 word of the same text, a GET whose
// If-None-Match matches is 304, ?partNumber= past the last part is 416 InvalidPartNumber, and
// a ListObjects v1 with a prefix lists the decoded keys.

import (
	"bytes"
	"errors"
	"fmt"
	"mime"
	"strings"

	"github.com/minio/minio-go/v7"
)

func conformCase(e *env, name string) error {
	text := "Hello World\u00e9"
	key := name + "/a b=c"
	_, err := e.mc.PutObject(e.ctx, e.bucket, key, bytes.NewReader([]byte("bar")), 3,
		minio.PutObjectOptions{UserMetadata: map[string]string{"meta1": text}})
	if err != nil {
		return fmt.Errorf("PutObject: %w", err)
	}
	st, err := e.mc.StatObject(e.ctx, e.bucket, key, minio.StatObjectOptions{})
	if err != nil {
		return fmt.Errorf("StatObject: %w", err)
	}
	got := st.UserMetadata["Meta1"]
	dec, err := new(mime.WordDecoder).DecodeHeader(got)
	if err != nil || dec != text {
		return fmt.Errorf("metadata %q decodes to %q (%v), want %q", got, dec, err, text)
	}
	opts := minio.GetObjectOptions{}
	if err := opts.SetMatchETagExcept(st.ETag); err != nil {
		return err
	}
	core := minio.Core{Client: e.mc} // its GetObject is one GET, partNumber included
	var r minio.ErrorResponse
	if body, _, _, err := core.GetObject(e.ctx, e.bucket, key, opts); err == nil {
		body.Close()
		return fmt.Errorf("GET If-None-Match its ETag: 200, want 304")
	} else if !errors.As(err, &r) || r.StatusCode != 304 {
		return fmt.Errorf("GET If-None-Match its ETag: %v, want 304", err)
	}
	opts = minio.GetObjectOptions{PartNumber: 2}
	if body, _, _, err := core.GetObject(e.ctx, e.bucket, key, opts); err == nil {
		body.Close()
		return fmt.Errorf("GET ?partNumber=2 of one part: 200, want 416")
	} else if !errors.As(err, &r) || r.StatusCode != 416 || r.Code != "InvalidPartNumber" {
		return fmt.Errorf("GET ?partNumber=2 of one part: %v, want 416 InvalidPartNumber", err)
	}
	var keys []string
	for o := range e.mc.ListObjects(e.ctx, e.bucket, minio.ListObjectsOptions{
		Prefix: name + "/a b", Recursive: true, UseV1: true}) {
		if o.Err != nil {
			return fmt.Errorf("ListObjects v1: %w", o.Err)
		}
		keys = append(keys, o.Key)
	}
	if strings.Join(keys, ",") != key {
		return fmt.Errorf("ListObjects v1 prefix %q: %v, want [%s]", name+"/a b", keys, key)
	}
	return e.mc.RemoveObject(e.ctx, e.bucket, key, minio.RemoveObjectOptions{})
}
