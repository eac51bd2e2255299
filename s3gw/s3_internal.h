/*
 * s3_internal: the contract between the HTTP server (s3_server_internal.h) and the operations
 * (s3_route.c and the files of s3_ops_internal.h). Private to s3gw/.
 *
 * One struct s3_req per request, owned by its connection, used only by the worker thread
 * that holds the connection (one at a time). The server parses the head and calls s3_ops_begin();
 * when the operation wants the body, the server decodes it (Content-Length, HTTP chunked,
 * aws-chunked) and hands payload spans to s3_ops_body() -- spans of the connection's read buffer,
 * with rq->cur_ref the reference that keeps them alive -- then calls s3_ops_end(). Operations
 * answer through the s3_resp_* helpers, which write to the socket.
 */
#ifndef ZEST_S3_INTERNAL_H
#define ZEST_S3_INTERNAL_H

#include <stdatomic.h>

#include "s3_chunked_internal.h"
#include "s3_sum_internal.h"

#define S3_PART_MAX_SIZE (5ull << 30) /* S3's largest multipart part */

enum s3_body_mode {
	S3_BODY_NONE,    /* no body wanted (it is drained if sent) */
	S3_BODY_STREAM,  /* payload streamed to s3_ops_body */
	S3_BODY_COLLECT, /* small body gathered into rq->body (XML), capped */
};

/* Operations, for metrics. */
enum s3_op {
	S3_OP_UNKNOWN,
	S3_OP_LIST_BUCKETS,
	S3_OP_CREATE_BUCKET,
	S3_OP_DELETE_BUCKET,
	S3_OP_HEAD_BUCKET,
	S3_OP_BUCKET_META, /* location, versioning */
	S3_OP_LIST_OBJECTS,
	S3_OP_PUT_OBJECT,
	S3_OP_GET_OBJECT,
	S3_OP_HEAD_OBJECT,
	S3_OP_DELETE_OBJECT,
	S3_OP_DELETE_OBJECTS,
	S3_OP_MPU_CREATE,
	S3_OP_MPU_PART,
	S3_OP_MPU_COMPLETE,
	S3_OP_MPU_ABORT,
	S3_OP_MPU_LIST,
	S3_OP_COUNT
};

struct s3_conn;
struct s3_put;

struct s3_req {
	struct s3_conn *conn;
	const struct s3_config *cfg;
	const struct s3_backend *be;
	struct s3_creds creds;
	struct s3_http_req http; /* points into head_copy */
	char *head_copy;
	struct s3_auth auth;
	char id[20]; /* x-amz-request-id */
	enum s3_op op;
	uint64_t start_ns;
	int status;     /* HTTP status sent */
	bool head_sent; /* response head written */
	bool close;     /* close the connection after this response */
	bool is_head;   /* HEAD request: no body in the response */

	/* routing */
	char bucket[64];
	char *key;      /* decoded, NUL-terminated, NULL for bucket-level */
	char *resource; /* for error bodies: the decoded path */

	/* body */
	enum s3_body_mode body_mode;
	uint64_t body_expected; /* decoded payload bytes expected (when known) */
	bool body_size_known;
	struct s3_buf body;     /* S3_BODY_COLLECT */
	struct zc_ref *cur_ref; /* reference on the bytes passed to s3_ops_body */
	struct s3_chunked aws;  /* aws-chunked decoder when in streaming mode */
	bool aws_chunked;
	struct s3_put *put;     /* operation state for streamed bodies */
	struct s3_md5mb *md5mb; /* the server's MD5 service, NULL: serial */
};

/* ---- implemented by s3_route.c (the operations behind it: s3_ops_internal.h) */

/* Route, authenticate and validate. Returns 0: the request is answered (maybe with an
 * error) or wants its body (rq->body_mode != NONE); < 0 only for fatal errors. */
int s3_ops_begin(struct s3_req *rq);
/* Payload span of a streamed or collected body. < 0: error already answered. */
int s3_ops_body(struct s3_req *rq, const uint8_t *p, size_t n);
/* The body ended cleanly: finish and answer. */
int s3_ops_end(struct s3_req *rq);
/* The request dies (connection lost, timeout, bad framing): release everything. err is
 * the S3 error to answer with if the response has not started (S3_OK: do not answer). */
void s3_ops_abort(struct s3_req *rq, enum s3_err err);
/* Free per-request memory. */
void s3_req_fini(struct s3_req *rq);

/* Multipart bootstrap: make sure the reserved bucket exists. */
int s3_ops_init_backend(const struct s3_backend *be);

/* ---- implemented by s3_conn_io.c */

/* Send the response head: status, standard headers, extra (complete "Name: v\r\n" lines,
 * may be NULL), Content-Length. Returns 0 or -errno (connection lost). */
int s3_resp_head(struct s3_req *rq, int status, const struct s3_buf *extra, uint64_t clen);
/* Send body bytes (after s3_resp_head). */
int s3_resp_data(struct s3_req *rq, const void *p, size_t n);
/* Send the body from a backend get stream (rq->be->get_open, after s3_resp_head); takes
 * ownership of stream. The server pulls and writes it once the operation has returned,
 * parking the connection while the client's socket is full: a slow reader holds neither
 * a worker nor more than the stream's bounded buffer. Returns 0. */
int s3_resp_stream(struct s3_req *rq, void *stream);
/* A complete response with an XML (or empty) body. */
int s3_resp_xml(struct s3_req *rq, int status, const struct s3_buf *extra,
                const struct s3_buf *xml);
/* A complete S3 error response; msg NULL: the default message. */
int s3_resp_error(struct s3_req *rq, enum s3_err err, const char *msg);

/* ---- metrics (s3_metrics.c) */

enum s3_copy_stage {
	S3_COPY_CARRY,     /* unparsed bytes carried to a fresh read buffer */
	S3_COPY_COLLECT,   /* small XML bodies gathered */
	S3_COPY_MD5_CARRY, /* span heads and tails (< 64 B each) into MD5 carry blocks */
	S3_COPY_STAGES
};

void s3_metric_copied(enum s3_copy_stage stage, uint64_t bytes);
/* Count an upload by its x-amz-content-sha256 mode. */
void s3_metric_payload(enum s3_payload mode);
const char *s3_op_name(enum s3_op op);

#endif
