package main

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math/rand"
	"sort"
	"strings"

	"github.com/minio/minio-go/v7"
)

const (
	miB = 1 << 20
	// minio-go's default part size (minPartSize) and thus the multipart threshold of PutObject.
	partSize = 16 * miB
)

var cases = []testCase{
	{"put_0", func(e *env, n string) error { return putCase(e, n, 0, false) }},
	{"put_1", func(e *env, n string) error { return putCase(e, n, 1, false) }},
	{"put_5m", func(e *env, n string) error { return putCase(e, n, 5*miB, false) }},
	{"put_16m", func(e *env, n string) error { return putCase(e, n, 16*miB, false) }},
	{"put_64m", func(e *env, n string) error { return putCase(e, n, 64*miB, false) }},
	{"put_100m", func(e *env, n string) error { return putCase(e, n, 100*miB, false) }},
	// an io.ReaderAt source takes minio-go's other multipart path: 4 parts in parallel,
	// no part checksums unless the client was told the server takes trailers
	{"put_40m_readat", func(e *env, n string) error { return putCase(e, n, 40*miB, true) }},
	{"get_range", getRangeCase},
	{"get_part_number", getPartNumberCase},
	{"stat_object", statCase},
	{"copy_object", copyCase},
	{"compose_object", composeCase},
	{"list_recursive", listRecursiveCase},
	{"list_delimiter", listDelimiterCase},
	{"remove_objects", removeObjectsCase},
	{"conform", conformCase},
}

// ---- object content: deterministic, cheap, and addressable at any offset ----

// Byte o of object (seed, size) is block[(o + shift(o / 1 MiB)) % 1 MiB]: every MiB differs,
// so a part served from the wrong offset is caught, and any range can be recomputed.
var block = func() []byte {
	b := make([]byte, miB)
	rand.New(rand.NewSource(1)).Read(b)
	return b
}()

type content struct {
	seed, size int64
}

func (c content) readAt(p []byte, off int64) int {
	n := 0
	for n < len(p) && off < c.size {
		i := off / miB
		shift := (i*7919 + c.seed*104729) % miB
		in := (off + shift) % miB
		end := int64(len(p) - n)
		if left := miB - off%miB; end > left {
			end = left
		}
		if left := c.size - off; end > left {
			end = left
		}
		// copy from the (rotated) block, wrapping at its end
		k := copy(p[n:n+int(end)], block[in:])
		if int64(k) < end {
			copy(p[n+k:n+int(end)], block[:end-int64(k)])
		}
		n += int(end)
		off += end
	}
	return n
}

func (c content) sum(h hash.Hash, off, n int64) []byte {
	buf := make([]byte, miB)
	for n > 0 {
		m := int64(len(buf))
		if m > n {
			m = n
		}
		c.readAt(buf[:m], off)
		h.Write(buf[:m])
		off += m
		n -= m
	}
	return h.Sum(nil)
}

func (c content) sha256(off, n int64) string { return hex.EncodeToString(c.sum(sha256.New(), off, n)) }

// streamReader has only Read, like warp's generated payloads: minio-go then streams parts with
// per-part CRC32C.
type streamReader struct {
	c   content
	off int64
}

func (r *streamReader) Read(p []byte) (int, error) {
	if r.off >= r.c.size {
		return 0, io.EOF
	}
	n := r.c.readAt(p, r.off)
	r.off += int64(n)
	return n, nil
}

type readAtReader struct{ streamReader }

func (r *readAtReader) ReadAt(p []byte, off int64) (int, error) {
	if off >= r.c.size {
		return 0, io.EOF
	}
	n := r.c.readAt(p, off)
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// ---- what AWS S3 answers ----

func partsOf(size int64) (n int, last int64) {
	if size < partSize {
		return 0, size
	}
	n = int((size + partSize - 1) / partSize)
	return n, size - int64(n-1)*partSize
}

// expectETag: the MD5 for a single PUT, MD5 of the parts' binary MD5s plus "-N" for multipart.
func expectETag(c content) string {
	n, _ := partsOf(c.size)
	if n == 0 {
		return hex.EncodeToString(c.sum(md5.New(), 0, c.size))
	}
	all := md5.New()
	for i := 0; i < n; i++ {
		all.Write(c.sum(md5.New(), int64(i)*partSize, partLen(c.size, i+1)))
	}
	return fmt.Sprintf("%s-%d", hex.EncodeToString(all.Sum(nil)), n)
}

// expectCompositeCRC32C: CRC32C of the parts' binary CRC32Cs, base64, plus "-N" (COMPOSITE).
func expectCompositeCRC32C(c content) string {
	n, _ := partsOf(c.size)
	tab := crc32.MakeTable(crc32.Castagnoli)
	all := crc32.New(tab)
	for i := 0; i < n; i++ {
		all.Write(c.sum(crc32.New(tab), int64(i)*partSize, partLen(c.size, i+1)))
	}
	return fmt.Sprintf("%s-%d", base64.StdEncoding.EncodeToString(all.Sum(nil)), n)
}

func partLen(size int64, part int) int64 {
	n, last := partsOf(size)
	if part == n {
		return last
	}
	return partSize
}

// ---- helpers ----

// s3code is the S3 error code somewhere in err's chain, or "".
func s3code(err error) string {
	var r minio.ErrorResponse
	if errors.As(err, &r) {
		return r.Code
	}
	return ""
}

func put(e *env, key string, c content, readAt bool) (minio.UploadInfo, error) {
	var r io.Reader = &streamReader{c: c}
	if readAt {
		r = &readAtReader{streamReader{c: c}}
	}
	info, err := e.mc.PutObject(e.ctx, e.bucket, key, r, c.size, minio.PutObjectOptions{})
	if err != nil {
		return info, fmt.Errorf("PutObject %s (%d B): %w", key, c.size, err)
	}
	return info, nil
}

// putSmall stores a fixture below the multipart threshold (one PutObject).
func putSmall(e *env, key string, c content) error {
	_, err := put(e, key, c, false)
	return err
}

func getSHA(e *env, key string, opts minio.GetObjectOptions) (string, int64, minio.ObjectInfo, error) {
	obj, err := e.mc.GetObject(e.ctx, e.bucket, key, opts)
	if err != nil {
		return "", 0, minio.ObjectInfo{}, fmt.Errorf("GetObject %s: %w", key, err)
	}
	defer obj.Close()
	h := sha256.New()
	n, err := io.Copy(h, obj)
	if err != nil {
		return "", n, minio.ObjectInfo{}, fmt.Errorf("GetObject %s: read: %w", key, err)
	}
	st, err := obj.Stat()
	if err != nil {
		return "", n, st, fmt.Errorf("GetObject %s: Stat: %w", key, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, st, nil
}

func checkWhole(e *env, key string, c content) error {
	sum, n, _, err := getSHA(e, key, minio.GetObjectOptions{})
	if err != nil {
		return err
	}
	if n != c.size {
		return fmt.Errorf("GetObject %s: %d bytes, want %d", key, n, c.size)
	}
	if want := c.sha256(0, c.size); sum != want {
		return fmt.Errorf("GetObject %s: SHA-256 %s, want %s", key, sum, want)
	}
	return nil
}

func removeAll(e *env, prefix string) {
	for o := range e.mc.ListObjects(e.ctx, e.bucket, minio.ListObjectsOptions{Prefix: prefix,
		Recursive: true}) {
		if o.Err == nil {
			_ = e.mc.RemoveObject(e.ctx, e.bucket, o.Key, minio.RemoveObjectOptions{})
		}
	}
}

// ---- cases ----

func putCase(e *env, name string, size int64, readAt bool) error {
	key := name + "/obj"
	c := content{seed: size, size: size}
	info, err := put(e, key, c, readAt)
	if err != nil {
		return err
	}
	defer removeAll(e, name+"/")
	if info.Size != size {
		return fmt.Errorf("UploadInfo.Size %d, want %d", info.Size, size)
	}
	if want := expectETag(c); info.ETag != want {
		return fmt.Errorf("ETag %q, want %q", info.ETag, want)
	}
	if n, _ := partsOf(size); n > 0 && !readAt {
		// the parts carried x-amz-checksum-crc32c; S3 reports the COMPOSITE checksum
		if want := expectCompositeCRC32C(c); info.ChecksumCRC32C != want {
			return fmt.Errorf("CompleteMultipartUpload ChecksumCRC32C %q, want %q",
				info.ChecksumCRC32C, want)
		}
	}
	return checkWhole(e, key, c)
}

func getRangeCase(e *env, name string) error {
	key := name + "/obj"
	c := content{seed: 7, size: 5*miB + 3}
	if err := putSmall(e, key, c); err != nil {
		return err
	}
	defer removeAll(e, name+"/")
	type rng struct {
		start, end  int64 // SetRange's arguments
		off, length int64 // the bytes S3 sends
	}
	for _, r := range []rng{
		{0, 0, 0, 1},                              // bytes=0-0
		{1000, 1999, 1000, 1000},                  // bytes=1000-1999
		{miB - 10, miB + 9, miB - 10, 20},         // across a MiB boundary
		{5 * miB, 0, 5 * miB, 3},                  // bytes=5242880- (open end)
		{0, -7, c.size - 7, 7},                    // bytes=-7 (suffix)
		{c.size - 2, c.size + 100, c.size - 2, 2}, // an end past the object is clamped
	} {
		opts := minio.GetObjectOptions{}
		if err := opts.SetRange(r.start, r.end); err != nil {
			return err
		}
		sum, n, _, err := getSHA(e, key, opts)
		if err != nil {
			return fmt.Errorf("%s: %w", opts.Header().Get("Range"), err)
		}
		if n != r.length || sum != c.sha256(r.off, r.length) {
			return fmt.Errorf("%s: %d bytes (want %d) or content differs", opts.Header().Get("Range"),
				n, r.length)
		}
	}
	// a range that starts past the end is 416 InvalidRange
	opts := minio.GetObjectOptions{}
	_ = opts.SetRange(c.size+10, 0)
	_, _, _, err := getSHA(e, key, opts)
	if code := s3code(err); code != "InvalidRange" {
		return fmt.Errorf("Range past the end: got %v, want InvalidRange", err)
	}
	return nil
}

func getPartNumberCase(e *env, name string) error {
	key := name + "/obj"
	c := content{seed: 11, size: 2*partSize + 5*miB + 1} // parts 16, 16, 5 MiB + 1
	// uploaded through the io.ReaderAt path (no part checksums): this case is about reads
	if _, err := put(e, key, c, true); err != nil {
		return err
	}
	defer removeAll(e, name+"/")
	n, _ := partsOf(c.size)
	core := minio.Core{Client: e.mc}
	off := int64(0)
	for p := 1; p <= n; p++ {
		want := partLen(c.size, p)
		// warp's read: GetObject with PartNumber, then the length of what came back
		sum, got, _, err := getSHA(e, key, minio.GetObjectOptions{PartNumber: p})
		if err != nil {
			return fmt.Errorf("partNumber=%d: %w", p, err)
		}
		if got != want {
			return fmt.Errorf("partNumber=%d: %d bytes, want %d", p, got, want)
		}
		if sum != c.sha256(off, want) {
			return fmt.Errorf("partNumber=%d: content is not bytes %d..%d", p, off, off+want-1)
		}
		// S3 answers 206 with Content-Range bytes a-b/total and x-amz-mp-parts-count
		body, _, h, err := core.GetObject(e.ctx, e.bucket, key, minio.GetObjectOptions{PartNumber: p})
		if err != nil {
			return fmt.Errorf("partNumber=%d (Core): %w", p, err)
		}
		body.Close()
		if cr, wantCR := h.Get("Content-Range"), fmt.Sprintf("bytes %d-%d/%d", off, off+want-1,
			c.size); cr != wantCR {
			return fmt.Errorf("partNumber=%d: Content-Range %q, want %q", p, cr, wantCR)
		}
		if pc := h.Get("X-Amz-Mp-Parts-Count"); pc != fmt.Sprint(n) {
			return fmt.Errorf("partNumber=%d: x-amz-mp-parts-count %q, want %d", p, pc, n)
		}
		off += want
	}
	// a part that does not exist is 416 InvalidPartNumber
	_, _, _, err := getSHA(e, key, minio.GetObjectOptions{PartNumber: n + 1})
	if code := s3code(err); code != "InvalidPartNumber" {
		return fmt.Errorf("partNumber=%d: got %v, want InvalidPartNumber", n+1, err)
	}
	return nil
}

func statCase(e *env, name string) error {
	key := name + "/obj"
	c := content{seed: 13, size: 123457}
	if err := putSmall(e, key, c); err != nil {
		return err
	}
	defer removeAll(e, name+"/")
	st, err := e.mc.StatObject(e.ctx, e.bucket, key, minio.StatObjectOptions{})
	if err != nil {
		return fmt.Errorf("StatObject: %w", err)
	}
	if st.Size != c.size {
		return fmt.Errorf("StatObject size %d, want %d", st.Size, c.size)
	}
	if want := expectETag(c); st.ETag != want {
		return fmt.Errorf("StatObject ETag %q, want %q", st.ETag, want)
	}
	if st.LastModified.IsZero() {
		return fmt.Errorf("StatObject: no Last-Modified")
	}
	_, err = e.mc.StatObject(e.ctx, e.bucket, name+"/missing", minio.StatObjectOptions{})
	if code := s3code(err); code != "NoSuchKey" {
		return fmt.Errorf("StatObject of a missing key: got %v, want NoSuchKey", err)
	}
	return nil
}

func copyCase(e *env, name string) error {
	src, dst := name+"/src (1)", name+"/dst (1)"
	c := content{seed: 17, size: 5*miB + 17}
	if err := putSmall(e, src, c); err != nil {
		return err
	}
	defer removeAll(e, name+"/")
	info, err := e.mc.CopyObject(e.ctx, minio.CopyDestOptions{Bucket: e.bucket, Object: dst},
		minio.CopySrcOptions{Bucket: e.bucket, Object: src})
	if err != nil {
		return fmt.Errorf("CopyObject: %w", err)
	}
	// a copy of a single-PUT object keeps its MD5 ETag
	if want := expectETag(c); info.ETag != want {
		return fmt.Errorf("CopyObject ETag %q, want %q", info.ETag, want)
	}
	return checkWhole(e, dst, c)
}

func composeCase(e *env, name string) error {
	sizes := []int64{5 * miB, 7*miB + 1, 5 * miB}
	var srcs []minio.CopySrcOptions
	var parts []content
	defer removeAll(e, name+"/")
	for i, s := range sizes {
		c := content{seed: int64(100 + i), size: s}
		key := fmt.Sprintf("%s/src-%d", name, i)
		if err := putSmall(e, key, c); err != nil {
			return err
		}
		srcs = append(srcs, minio.CopySrcOptions{Bucket: e.bucket, Object: key})
		parts = append(parts, c)
	}
	dst := name + "/composed"
	info, err := e.mc.ComposeObject(e.ctx, minio.CopyDestOptions{Bucket: e.bucket, Object: dst},
		srcs...)
	if err != nil {
		return fmt.Errorf("ComposeObject: %w", err)
	}
	// one UploadPartCopy per source: the ETag is the MD5 of their MD5s, "-3"
	all := md5.New()
	want := sha256.New()
	var total int64
	for _, c := range parts {
		all.Write(c.sum(md5.New(), 0, c.size))
		c.sum(want, 0, c.size)
		total += c.size
	}
	if etag := fmt.Sprintf("%s-%d", hex.EncodeToString(all.Sum(nil)), len(parts)); info.ETag != etag {
		return fmt.Errorf("ComposeObject ETag %q, want %q", info.ETag, etag)
	}
	sum, n, _, err := getSHA(e, dst, minio.GetObjectOptions{})
	if err != nil {
		return err
	}
	if n != total || sum != hex.EncodeToString(want.Sum(nil)) {
		return fmt.Errorf("composed object: %d bytes (want %d) or content differs", n, total)
	}
	return nil
}

// Keys with the characters minio-go percent-encodes ('(' ')' and spaces) and a tree for the
// delimiter listing.
var listKeys = []string{"top(3) file", "dir a/obj (1).txt", "dir a/sub/x(2)", "dir a/sub/y z",
	"dir b/y z", "dir b/(z)", "zz)"}

func putListTree(e *env, prefix string) error {
	for i, k := range listKeys {
		if err := putSmall(e, prefix+k, content{seed: int64(i), size: int64(i + 1)}); err != nil {
			return err
		}
	}
	return nil
}

func list(e *env, opts minio.ListObjectsOptions) ([]string, error) {
	var out []string
	for o := range e.mc.ListObjects(e.ctx, e.bucket, opts) {
		if o.Err != nil {
			return out, fmt.Errorf("ListObjects: %w", o.Err)
		}
		out = append(out, o.Key)
	}
	return out, nil
}

func sameList(what string, got, want []string) error {
	if strings.Join(got, "|") != strings.Join(want, "|") {
		return fmt.Errorf("%s: got %q, want %q", what, got, want)
	}
	return nil
}

func listRecursiveCase(e *env, name string) error {
	prefix := name + "/"
	if err := putListTree(e, prefix); err != nil {
		return err
	}
	defer removeAll(e, prefix)
	var want []string
	for _, k := range listKeys {
		want = append(want, prefix+k)
	}
	sort.Strings(want) // S3 lists in UTF-8 byte order
	got, err := list(e, minio.ListObjectsOptions{Prefix: prefix, Recursive: true})
	if err != nil {
		return err
	}
	if err := sameList("recursive", got, want); err != nil {
		return err
	}
	// two keys a page: every page after the first is asked for with continuation-token
	got, err = list(e, minio.ListObjectsOptions{Prefix: prefix, Recursive: true, MaxKeys: 2})
	if err != nil {
		return err
	}
	return sameList("recursive, max-keys=2", got, want)
}

func listDelimiterCase(e *env, name string) error {
	prefix := name + "/"
	if err := putListTree(e, prefix); err != nil {
		return err
	}
	defer removeAll(e, prefix)
	// delimiter "/": objects directly under the prefix, and common prefixes; minio-go hands
	// out each page's objects before its prefixes, so only the set is compared
	want := []string{prefix + "dir a/", prefix + "dir b/", prefix + "top(3) file", prefix + "zz)"}
	got, err := list(e, minio.ListObjectsOptions{Prefix: prefix})
	if err != nil {
		return err
	}
	sort.Strings(got)
	if err := sameList("delimiter /", got, want); err != nil {
		return err
	}
	want = []string{prefix + "dir a/obj (1).txt", prefix + "dir a/sub/"}
	got, err = list(e, minio.ListObjectsOptions{Prefix: prefix + "dir a/"})
	if err != nil {
		return err
	}
	sort.Strings(got)
	if err := sameList("delimiter / under \"dir a/\"", got, want); err != nil {
		return err
	}
	// one entry a page: a prefix must not come back twice, nor an object be lost
	got, err = list(e, minio.ListObjectsOptions{Prefix: prefix, MaxKeys: 1})
	if err != nil {
		return err
	}
	sort.Strings(got)
	return sameList("delimiter /, max-keys=1", got,
		[]string{prefix + "dir a/", prefix + "dir b/", prefix + "top(3) file", prefix + "zz)"})
}

func removeObjectsCase(e *env, name string) error {
	prefix := name + "/"
	var keys []string
	for i := 0; i < 25; i++ {
		keys = append(keys, fmt.Sprintf("%sk (%02d)", prefix, i))
	}
	keys = append(keys, prefix+"empty")
	for i, k := range keys {
		if err := putSmall(e, k, content{seed: int64(i), size: int64(i % 3 * 1000)}); err != nil {
			return err
		}
	}
	// RemoveObjects feeds a listing into POST ?delete (Content-MD5, up to 1000 keys a request)
	objs := e.mc.ListObjects(e.ctx, e.bucket, minio.ListObjectsOptions{Prefix: prefix,
		Recursive: true})
	var errs []string
	for r := range e.mc.RemoveObjects(e.ctx, e.bucket, objs, minio.RemoveObjectsOptions{}) {
		errs = append(errs, fmt.Sprintf("%s: %v", r.ObjectName, r.Err))
	}
	if len(errs) > 0 {
		return fmt.Errorf("RemoveObjects: %s", strings.Join(errs, "; "))
	}
	left, err := list(e, minio.ListObjectsOptions{Prefix: prefix, Recursive: true})
	if err != nil {
		return err
	}
	if len(left) > 0 {
		return fmt.Errorf("RemoveObjects left %d objects: %q", len(left), left)
	}
	// deleting keys that are not there is not an error in S3
	gone := make(chan minio.ObjectInfo, 2)
	gone <- minio.ObjectInfo{Key: prefix + "never-was"}
	gone <- minio.ObjectInfo{Key: keys[0]}
	close(gone)
	for r := range e.mc.RemoveObjects(e.ctx, e.bucket, gone, minio.RemoveObjectsOptions{}) {
		return fmt.Errorf("RemoveObjects of missing keys: %s: %v", r.ObjectName, r.Err)
	}
	return nil
}
