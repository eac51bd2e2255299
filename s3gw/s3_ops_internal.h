/*
 * s3_ops_internal: what the S3 operation files share. Private to s3gw/.
 *
 *   s3_req.c     request accessors (headers, query, replies), names, times, attributes,
 *                collected (XML) bodies
 *   s3_route.c   routing (path style and virtual host), authentication, dispatch, and the
 *                s3_ops_* entry points the server calls
 *   s3_bucket.c  bucket operations and object listings
 *   s3_object.c  GET / HEAD / DELETE, PUT of objects and parts, DeleteObjects
 *   s3_mpu.c     multipart uploads: create, complete, abort
 *   s3_mpu_list.c  ListParts and ListMultipartUploads
 *   s3_refuse.c  requests naming features zest lacks (SSE, ACLs, tags, lock, versions)
 *   s3_mpu_parts.c  multipart object checksums from the parts' and the part table
 *   s3_copy.c    CopyObject and UploadPartCopy (server-side compose, else streamed)
 *   s3_cond.c    write conditions (If-None-Match: *, If-Match) and ETag lists
 *   s3_bget.c    s3_backend_get: the blocking read of a backend over its pulled form
 *
 * Everything here runs on the worker that serves the request (see s3_internal.h).
 * Replies: the s3_rq_* error helpers answer the request and return 0.
 *
 * Multipart state lives in the backend as ordinary objects in S3_RESERVED_BUCKET (a name
 * no client can create or address, since it starts with a dot):
 *   u/<bucket>/<upload-id>       upload record: content = the object key, attrs = the
 *                                object's attributes + "zest-ck:<algorithm>" and
 *                                "zest-ckt:COMPOSITE|FULL_OBJECT"
 *   t/<bucket>/<upload-id>       part table of a completed object, when too large for its
 *                                attrs (s3_mpu_parts.c)
 *   p/<upload-id>/<nnnnn>        a part (placed with the target object,
 *                                s3_place_internal.h); its attrs carry the part checksum
 * Complete asks the backend to Compose the parts into the target object. The upload
 * record goes last, once every part is gone: while it exists, a retried Complete or an
 * Abort finds the upload and removes what is left.
 */
#ifndef ZEST_S3_OPS_INTERNAL_H
#define ZEST_S3_OPS_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "s3_internal.h"
#include "s3_place_internal.h"
#include "s3_xml_internal.h"
#include "zc_names.h"

#define S3_NS    "http://s3.amazonaws.com/doc/2006-03-01/"
#define XML_DECL "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
#define MIN_PART (5ull << 20)
#define MAX_PART (5ull << 30)
#define MPU_REC  "u/"
#define MPU_PART "p/"

/* A write's conditions as the request gave them (s3_cond.c). */
struct s3_wcond {
	struct s3_cond c;                /* what the backend checks in the commit */
	char none_match[S3_ETAG_MAX];    /* If-None-Match: <etag> ("": none), resolved late */
	bool seen;                       /* c holds what a stat saw: its failure is a race */
};

/* A streamed upload (object or part) in progress; owned by its request. */
struct s3_put {
	bool is_part;
	void *stream;
	struct s3_sum sum;
	uint64_t got;
	bool has_md5;
	uint8_t content_md5[16];
	unsigned hdr_ck; /* algorithm of an x-amz-checksum-<alg> header */
	char hdr_ck_val[64];
	unsigned want_ck; /* algorithm whose value we store and return */
	struct s3_buf attrs;
	unsigned part;
	char upload_id[64];
	struct s3_wcond cond; /* PutObject's If-None-Match / If-Match */
};

/* An upload record as loaded: the object key it was created for and its attributes. */
struct mpu_rec {
	struct s3_buf key;
	struct s3_obj_info info;
};

/* Object checksum of a multipart upload, fed each part's checksum in order. */
struct s3_mpu_sum {
	unsigned ck; /* S3_CK_*, 0: none */
	bool full;   /* FULL_OBJECT (CRCs combined) rather than COMPOSITE */
	size_t nparts;
	uint64_t size;
	struct s3_sum sum; /* COMPOSITE: over the binary part checksums */
	uint64_t crc;      /* FULL_OBJECT: CRC of the parts so far */
};

/* Run-length part table being built (s3_mpu_parts.c says why run-length). */
struct s3_ptab {
	struct s3_buf text;
	uint64_t run_size;
	size_t run, n;
};

/* ---- s3_req.c */

const struct s3_hdr *s3_rq_hdr(const struct s3_req *rq, const char *name);
bool s3_rq_hdr_str(const struct s3_req *rq, const char *name, char *out, size_t cap);
int s3_rq_query(const struct s3_req *rq, const char *name, char *out, size_t cap);
bool s3_rq_has_query(const struct s3_req *rq, const char *name);
bool s3_rq_method_is(const struct s3_req *rq, const char *m);
int s3_rq_error(struct s3_req *rq, enum s3_err e, const char *msg);
int s3_rq_backend_error(struct s3_req *rq, int rc);
void s3_etag_hex(const uint8_t md5[16], char *out);
void s3_http_time(uint64_t ns, char *out, size_t cap);
bool s3_http_time_parse(const char *s, time_t *out);
enum s3_err s3_key_check(const char *k, size_t n);
void s3_attr_add(struct s3_buf *b, const char *name, size_t nl, const char *v, size_t vl);
/*
 * User metadata S3 takes with an object: the bytes of every x-amz-meta-* name (after the
 * prefix) and value, summed, at most 2 KiB (AWS's limit for PutObject, CopyObject and
 * CreateMultipartUpload).
 */
#define S3_USER_META_MAX 2048
/* Append the headers S3 stores with an object to b. Returns S3_OK, or
 * S3E_METADATA_TOO_LARGE (b then holds them all the same) over S3_USER_META_MAX. */
enum s3_err s3_attrs_collect(const struct s3_req *rq, struct s3_buf *b);
int s3_attr_get(const char *attrs, size_t len, const char *name, const char **val);
void s3_attrs_to_headers(const struct s3_req *rq, const struct s3_obj_info *info, bool ranged,
                         struct s3_buf *b);
int s3_parse_uint(const char *s, unsigned long max, unsigned long *out);
int s3_body_collect_begin(struct s3_req *rq);
enum s3_err s3_body_collect_verify(struct s3_req *rq);
bool s3_rq_has_integrity_header(const struct s3_req *rq);

/* ---- s3_bucket.c */

int s3_op_list_buckets(struct s3_req *rq);
int s3_bucket_create_end(struct s3_req *rq);
int s3_op_bucket_simple(struct s3_req *rq);
int s3_op_bucket_meta(struct s3_req *rq, bool location);
int s3_op_list_objects(struct s3_req *rq, bool v2);

/* ---- s3_object.c */

int s3_op_get_object(struct s3_req *rq);
int s3_op_delete_object(struct s3_req *rq);
void s3_put_free(struct s3_req *rq);
int s3_op_put_begin(struct s3_req *rq, bool is_part);
int s3_put_body(struct s3_req *rq, const uint8_t *b, size_t n);
int s3_put_end(struct s3_req *rq);
int s3_delete_objects_end(struct s3_req *rq);

/* ---- s3_bget.c */

/*
 * The blocking read of a backend (multipart records, copies, GET's own path): the pulled
 * form when the backend has it (get_open/get_next/get_close, each segment's ref put after
 * emit), else be->get. Same arguments and returns as be->get.
 */
int s3_backend_get(const struct s3_backend *be, const char *bucket, const char *key, uint64_t off,
                   uint64_t len, bool has_len, s3_info_fn on_info, s3_span_fn emit, void *arg);

/* ---- s3_cond.c */

/* Does the comma-separated ETag list (quoted or not, "*": any) name etag? */
bool s3_etag_list_match(const char *list, size_t n, const char *etag);
/* The read conditions under prefix ("" for GET/HEAD, "x-amz-copy-source-" for a copy's
 * source) against info: S3_OK, S3E_PRECONDITION_FAILED, or not_modified (GET's 304; a
 * copy answers 412 there too). */
enum s3_err s3_preconditions(const struct s3_req *rq, const char *prefix,
                             const struct s3_obj_info *info, enum s3_err not_modified);
/* A write's If-None-Match / If-Match into out: S3_OK, or S3E_PRECONDITION_FAILED (an
 * ETag no object can have). */
enum s3_err s3_cond_parse(const struct s3_req *rq, struct s3_wcond *out);
/*
 * Just before the commit: If-None-Match: <etag> against the key's current object. It
 * matches: S3E_PRECONDITION_FAILED. Otherwise w->c gets what was seen (the key missing:
 * if_none_match; another ETag: if_match that ETag), so the backend's commit checks it
 * atomically, and a write that came in between fails the commit: s3_cond_error() makes that
 * 409 ConditionalRequestConflict, as S3 answers a race. S3_OK or the stat's error.
 */
enum s3_err s3_cond_resolve(struct s3_req *rq, const char *bucket, const char *key,
                            struct s3_wcond *w);
/* The S3 error of a commit under w that failed with rc. */
enum s3_err s3_cond_error(const struct s3_wcond *w, int rc);
/* Answer that error (s3_rq_backend_error's logging for the others). */
int s3_rq_commit_error(struct s3_req *rq, const struct s3_wcond *w, int rc);

/* ---- s3_copy.c */

/* A PUT with x-amz-copy-source (is_part: UploadPartCopy): done and answered at once. */
int s3_op_copy(struct s3_req *rq, bool is_part);

/* ---- s3_mpu.c */

int s3_mpu_load(struct s3_req *rq, const char *upload_id, struct mpu_rec *r);
/* Write record rk of the reserved bucket: body (len bytes: what it holds), its etag and
 * attrs, under cond (NULL: none); info gets the commit's (an upload's record, its
 * marks and its part table all go this way). 0 or what the backend answered. */
int s3_mpu_put_record(struct s3_req *rq, const char *rk, const void *body, size_t len,
                      const char *etag, const char *attrs, size_t attrs_len,
                      const struct s3_cond *cond, struct s3_obj_info *info);
/* ---- s3_mpu_state.c: who ends an upload (the record's "zest-state" mark) */
enum s3_mpu_state { S3_MPU_OPEN, S3_MPU_COMPLETING, S3_MPU_ABORTING };
enum s3_mpu_state s3_mpu_rec_state(const struct mpu_rec *r);
/* The record of upload uid of rq->bucket into r (r->key initialised here, the caller's to
 * fini), without s3_mpu_load's key check: 0, S3_E(S3E_NO_SUCH_UPLOAD), < 0. */
int s3_mpu_read(struct s3_req *rq, const char *uid, struct mpu_rec *r);
/* A fresh random ETag for an upload record (32 hex digits + NUL). */
int s3_mpu_rec_etag(char out[33]);
/* Mark the upload r holds as want (S3_MPU_COMPLETING or S3_MPU_ABORTING), fenced on the
 * ETag r holds: 1 marked by this call, 0 it already was (a retry), S3_E(S3E_NO_SUCH_UPLOAD)
 * the other kind of request holds it or the record went, < 0 an error. r follows the
 * record (reread when another request's mark went in first). */
int s3_mpu_take(struct s3_req *rq, const char *uid, struct mpu_rec *r, enum s3_mpu_state want);
/* A Complete that marked and failed: back to open (best effort, logged). */
void s3_mpu_release(struct s3_req *rq, const char *uid, struct mpu_rec *r);
unsigned s3_mpu_rec_ck(const struct mpu_rec *r);
/* DeleteBucket's part: every upload of rq->bucket removed as Abort does; < 0 stopped. */
int s3_mpu_drop_bucket(struct s3_req *rq);
int s3_op_mpu_create(struct s3_req *rq);
int s3_mpu_complete_end(struct s3_req *rq);
int s3_op_mpu_abort(struct s3_req *rq);
bool s3_mpu_rec_full(const struct mpu_rec *r);
/* The callbacks that read an upload record into a struct mpu_rec (be->get). */
int s3_mpu_rec_emit(void *arg, const uint8_t *p, size_t n);
int s3_mpu_rec_info(void *arg, const struct s3_obj_info *info);
/* Every part object of upload uid, in part order (the listing is the caller's). */
int s3_mpu_list_parts(struct s3_req *rq, const char *uid, struct s3_list_result *all);
/* A part object's number, from its key "p/<upload-id>/<nnnnn>". */
unsigned s3_mpu_part_number(const char *key);

/* ---- s3_mpu_list.c */

int s3_op_list_parts(struct s3_req *rq);
int s3_op_list_uploads(struct s3_req *rq);

/* ---- s3_refuse.c */

/* Refuse a request that asks for what zest does not do (see s3_refuse.c), before the
 * dispatch. Returns 1 when it answered with the S3 error, 0 to go on. */
int s3_refuse_unsupported(struct s3_req *rq);
/* ---- s3_mpu_parts.c */

int s3_mpu_sum_init(struct s3_mpu_sum *m, unsigned ck, bool full); /* 0 or -ENOMEM */
/* Fold in one part's checksum (base64 as stored) and size; -EINVAL for a bad value. */
int s3_mpu_sum_add(struct s3_mpu_sum *m, const char *b64, uint64_t size);
/* The object's value as S3 reports it (composite: "<base64>-<parts>"); out >= 72 bytes. */
void s3_mpu_sum_value(struct s3_mpu_sum *m, char *out);
void s3_mpu_sum_fini(struct s3_mpu_sum *m);
/* Does a client's value match ours? A composite one may come without "-<parts>". */
bool s3_mpu_ck_matches(const char *mine, const char *given, bool composite);

/* The multipart ETag of a Complete's part list: MD5 of the binary part MD5s, "-<parts>".
 * 0, -EINVAL (an ETag that is not an MD5) or -ENOMEM. */
int s3_mpu_etag(const struct s3_complete_req *cr, char etag[48]);
/* A part's stored checksum of algorithm ck, base64 into out: 1 found, 0 none, < 0 error. */
int s3_mpu_part_checksum(struct s3_req *rq, const char *pkey, unsigned ck, char out[64]);

void s3_ptab_init(struct s3_ptab *t);
void s3_ptab_add(struct s3_ptab *t, uint64_t size);
/* Record the table: into attrs, or as its own record when too long. 0 or -errno. */
int s3_ptab_store(struct s3_req *rq, const char *uid, struct s3_ptab *t, struct s3_buf *attrs);
void s3_ptab_fini(struct s3_ptab *t);
/* Byte range of part pn of the object info describes, and its part count. Returns 0 for a
 * multipart object, 1 for a plain one (part 1 is all of it), -ERANGE when there is no
 * such part, other -errno when the table cannot be read. */
int s3_ptab_locate(struct s3_req *rq, const struct s3_obj_info *info, unsigned pn, uint64_t *off,
                   uint64_t *len, unsigned *count);

#endif
