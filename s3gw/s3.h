/*
 * s3gw: the zest S3 gateway. It speaks S3 over HTTP/1.1 (SigV4 and SigV2, aws-chunked
 * uploads, multipart, copies, conditional writes) and keeps every object in a backend: the
 * datanodes over gRPC (s3_backend_rpc_create), the cluster over etcd and the live datanodes
 * (s3_backend_cluster_create), or a caller's own (tests/unit/s3gw/mem_backend.c). This
 * header is the server and the backend interface; the parsers, signers and digests behind
 * them are internal (s3_*_internal.h, for s3gw/ and its tests and fuzzers only).
 *
 * Threading: the server runs a few epoll loops (accept, readiness, timeouts) and a pool of
 * workers. A readable connection is served by one worker at a time (EPOLLONESHOT), which
 * may block on the backend without stalling any other connection; a GET body is pulled
 * from the backend (get_open/get_next) and a connection whose socket is full parks instead
 * of holding its worker. Every struct s3_backend call comes from a worker and may block.
 * Errors: >= 0 success, -errno failure, ZC_E(code) for what a datanode named (zc_err.h).
 *
 * Files (libzest_s3: the protocol core, no gRPC; libzest_s3_rpc: the backends over gRPC):
 *   s3_util.c      the S3 error table, bounded buffers, hex/base64/percent-encoding
 *   s3_sum.c       one-pass payload checksums: MD5 (ETag), SHA-1, SHA-256, CRC32, CRC32C,
 *                  CRC64NVME                                           (s3_sum_internal.h)
 *   s3_md5x8.c     MD5 of 8 messages in AVX2 lanes                     (s3_sum_internal.h)
 *   s3_md5mb.c     the service hashing concurrent uploads' ETags in those lanes   (idem)
 *   s3_sigv4.c     SigV4: Authorization header, presigned URLs, chunk and trailer
 *                  signatures                                          (s3_sig_internal.h)
 *   s3_sigv2.c     SigV2, header and presigned, for older clients      (s3_sig_internal.h)
 *   s3_http.c      incremental HTTP/1.1 request-head parser           (s3_http_internal.h)
 *   s3_chunked.c   HTTP chunked and aws-chunked body decoders      (s3_chunked_internal.h)
 *   s3_xml.c       response XML writers, request body parsers (libxml2) (s3_xml_internal.h)
 *   s3_place.c     rendezvous placement over the datanodes, the listing merge
 *                                                                     (s3_place_internal.h)
 *   s3_server.c, s3_conn.c, s3_conn_io.c, s3_metrics.c
 *                  the HTTP server: loops, workers, connections, TLS, timeouts, /metrics
 *                                                                    (s3_server_internal.h)
 *   s3_route.c     routing, authentication, dispatch: the server's entry to the operations
 *                                                                           (s3_internal.h)
 *   s3_req.c, s3_bucket.c, s3_object.c, s3_mpu.c, s3_mpu_state.c, s3_mpu_parts.c,
 *   s3_mpu_list.c, s3_copy.c, s3_cond.c, s3_refuse.c, s3_bget.c
 *                  the S3 operations over a struct s3_backend      (s3_ops_internal.h says
 *                                                                    which file holds what)
 *   s3_cli.c       the zest-s3gw command line (s3_main); main.c, the program
 *   s3_backend_rpc.c, s3_brpc_put.c, s3_brpc_get.c, s3_brpc_segq.c, s3_brpc_meta.c
 *                  the backend over a --datanode list             (s3_backend_rpc_internal.h)
 *   s3_bcl.c, s3_bcl_plan.c, s3_bcl_cread.c, s3_bcl_get.c, s3_bcl_meta.c
 *                  the cluster backend: etcd records, coordinator PUT, cell reads and
 *                  rebuilds                                            (s3_bcl_internal.h)
 */
#ifndef ZEST_S3_H
#define ZEST_S3_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zc_err.h"
#include "zc_names.h"
#include "zc_ref.h"

#define S3_MAX_KEY   ZC_KEY_MAX
#define S3_ETAG_MAX  72
#define S3_ATTRS_MAX 4096

/* A growable byte buffer with a hard cap (s3_util_internal.h); backends get one to append
 * their /metrics lines to. */
struct s3_buf;

/* Receives payload spans; they point into the caller's buffer, valid for the call. */
typedef int (*s3_span_fn)(void *arg, const uint8_t *p, size_t n);

/* ---------------------------------------------------------------- backend */

/* multipart records; not a legal S3 bucket name (common/zc_names.h: the datanode takes it) */
#define S3_RESERVED_BUCKET ZC_RESERVED_BUCKET

/*
 * Multipart parts are objects of S3_RESERVED_BUCKET too, "p/<upload-id>/<nnnnn>", never
 * keys of a client's bucket: a client listing is a plain backend listing. Placement puts
 * them on the datanode of their target object (s3_place), where Compose joins objects of
 * any buckets into the target.
 */

struct s3_obj_info {
	char key[S3_MAX_KEY + 1];
	uint64_t size;
	char etag[S3_ETAG_MAX]; /* without quotes */
	uint64_t mtime_ns;
	char attrs[S3_ATTRS_MAX]; /* "name:value\n" lines (content-type, x-amz-meta-*, ...) */
	size_t attrs_len;
};

struct s3_list_entry {
	char *key; /* owned by the result */
	uint64_t size;
	char etag[S3_ETAG_MAX];
	uint64_t mtime_ns;
};

struct s3_list_result {
	struct s3_list_entry *entries;
	size_t n, cap;
	char **prefixes;
	size_t nprefix, prefix_cap;
	bool truncated;
	char *next_start_after; /* owned; NULL when not truncated */
};

void s3_list_result_fini(struct s3_list_result *r);
int s3_list_result_add(struct s3_list_result *r, const char *key, uint64_t size, const char *etag,
                       uint64_t mtime_ns);
int s3_list_result_add_prefix(struct s3_list_result *r, const char *prefix);

struct s3_bucket_info {
	char name[64];
	uint64_t ctime_ns;
};

struct s3_objref {
	const char *bucket, *key;
	const char *etag; /* compose: NULL/"" any, else the part must still have this ETag
	                   * (ZC_E(ZC_CHANGED) otherwise: overwritten since the caller looked) */
};

typedef int (*s3_info_fn)(void *arg, const struct s3_obj_info *info);

/*
 * A condition on the object a write replaces (S3 conditional writes), checked by the
 * backend atomically with the commit: if_none_match, the key must not exist; if_match
 * ("" : none), it must exist with this ETag (no quotes; "*": any). A condition that does
 * not hold fails the commit with ZC_E(ZC_PRECONDITION), or ZC_E(ZC_NO_KEY) for if_match
 * on a missing key, and nothing changes.
 */
struct s3_cond {
	bool if_none_match;
	char if_match[S3_ETAG_MAX];
};

/*
 * The datanode interface. Every call returns >= 0, -errno, or ZC_E(code) for an error a
 * datanode named (a test double must answer the same way). The gateway's own S3-only
 * answers (NoSuchUpload, InvalidRange, ...) are S3_E(enum s3_err), never a backend's
 * (s3_util_internal.h).
 * put_write's segment is borrowed: a backend that keeps the bytes past the call takes
 * zc_ref_get(seg->ref) and puts it when done (the bytes live in the connection's read
 * buffer). -EAGAIN from any call is backpressure (503 SlowDown).
 */
struct s3_backend {
	void *ctx;
	int (*put_open)(void *ctx, const char *bucket, const char *key, uint64_t size,
	                bool size_known, void **stream);
	int (*put_write)(void *stream, const struct zc_seg *seg);
	/* Optional (NULL: put_write): the same with the span's CRC32C, computed in the
	 * gateway's one pass over it, so the backend need not read the bytes again. */
	int (*put_write_crc)(void *stream, const struct zc_seg *seg, uint32_t crc32c);
	/* Commit: the object becomes visible (if cond, NULL: none, holds); frees the stream
	 * whatever the result. */
	int (*put_commit)(void *stream, const char *etag, const char *attrs, size_t attrs_len,
	                  const struct s3_cond *cond, struct s3_obj_info *out);
	void (*put_abort)(void *stream); /* frees the stream */
	/* Read [off, off+len) (has_len false: to the end). on_info first (may fail the call with
	 * its return value, e.g. for preconditions), then emit with the bytes in order. NULL
	 * when the backend has the pulled form below; callers use s3_backend_get()
	 * (s3_ops_internal.h). */
	int (*get)(void *ctx, const char *bucket, const char *key, uint64_t off, uint64_t len,
	           bool has_len, s3_info_fn on_info, s3_span_fn emit, void *arg);
	/* The same read, pulled, for a caller that must not wait on its own consumer (the
	 * server's GET: a slow client parks its connection instead of holding a worker).
	 * get_open learns the object facts (the first chunk, or a stat) into *info: 0 and
	 * *stream, NULL when off >= info->size (nothing to read; the caller decides), or
	 * -errno. get_next hands out the next segment with a ref taken for the caller (put
	 * it): 1, 0 at the end, -errno; it may wait on the datanode, never on a client.
	 * get_close frees the stream, done or not. At most ~3 MiB are buffered per stream.
	 * All three NULL: callers use get. */
	int (*get_open)(void *ctx, const char *bucket, const char *key, uint64_t off, uint64_t len,
	                bool has_len, struct s3_obj_info *info, void **stream);
	int (*get_next)(void *stream, struct zc_seg *seg);
	void (*get_close)(void *stream);
	int (*stat)(void *ctx, const char *bucket, const char *key, struct s3_obj_info *out);
	int (*del)(void *ctx, const char *bucket, const char *key, bool *existed);
	int (*list)(void *ctx, const char *bucket, const char *prefix, const char *start_after,
	            const char *delimiter, unsigned limit, struct s3_list_result *out);
	/* bucket/key = the parts' contents in order, by reference (no bytes move), under cond
	 * (NULL: none). -EXDEV: some part is held where the target is not (another datanode);
	 * the caller copies the bytes itself. */
	int (*compose)(void *ctx, const char *bucket, const char *key,
	               const struct s3_objref *parts, size_t nparts, bool delete_parts,
	               const char *etag, const char *attrs, size_t attrs_len,
	               const struct s3_cond *cond, struct s3_obj_info *out);
	int (*bucket_create)(void *ctx, const char *bucket);
	int (*bucket_delete)(void *ctx, const char *bucket);
	int (*bucket_head)(void *ctx, const char *bucket, struct s3_bucket_info *out);
	/* Fills up to cap entries; returns the count (the reserved bucket included). */
	int (*bucket_list)(void *ctx, struct s3_bucket_info *out, size_t cap);
	/* Optional (NULL: none): the backend's own lines of /metrics, appended to buf. */
	void (*metrics)(void *ctx, struct s3_buf *buf);
};

/*
 * A datanode stream of the gateway (a PUT's Write, a GET's Read or ReadCell) whose node makes
 * no progress this long is cancelled (rpc_client_opts.progress_timeout_ms): the PUT fails
 * with ZC_UNAVAILABLE (503 SlowDown), a cluster GET reads around the node. The default is
 * above a coordinator's peer timeout (10 s), so that a coordinator writing around a hung
 * peer answers before the gateway gives up on it.
 */
#define S3_STREAM_TIMEOUT_MS 15000

/*
 * The real backend: one rpc client per datanode address ("HOST:PORT", n >= 1, no
 * duplicates), objects placed with s3_place() over the list in this order, bucket calls
 * sent to every node, listings merged (s3_backend_rpc.c). Connects lazily, over mutual
 * TLS with tls's cluster CA and client certificate (or plaintext when tls->insecure;
 * rpc_tls.h), streams cut after stream_timeout_ms without progress (0:
 * S3_STREAM_TIMEOUT_MS). Returns 0 and *out, -EINVAL (no nodes, bad TLS files: logged),
 * -EEXIST (a node twice) or -ENOMEM. Destroy after the server that uses it; every stream
 * must be over. NULL: no-op.
 */
struct rpc_tls;
int s3_backend_rpc_create(const char *const *nodes, unsigned n, const struct rpc_tls *tls,
                          unsigned stream_timeout_ms, struct s3_backend **out);
void s3_backend_rpc_destroy(struct s3_backend *be);

/*
 * Cluster mode (docs/cluster.md): records, buckets and listings in etcd at endpoints
 * ("host:port,...", https:// for TLS with tls's CA and certificate), the datanodes from
 * the membership view, one rpc client per node address (made on first use, mutual TLS as
 * s3_backend_rpc_create's). PUT goes to the first node of zc_place_rank(bucket/key) that
 * connects (the coordinator), GET reads the record's cells (ReadCell) and rebuilds what is
 * missing from parity (counted in /metrics as zest_degraded_reads_total); streams time
 * out as s3_backend_rpc_create's, a ReadCell at most after 5 s (a GET reads around a
 * silent node). Creates the reserved bucket in etcd if absent. Returns 0 and *out,
 * -EINVAL (bad endpoints or TLS files: logged), an etcd error (unreachable: logged) or
 * -ENOMEM. Destroy after the server; NULL: no-op.
 */
int s3_backend_cluster_create(const char *endpoints, const struct rpc_tls *tls,
                              const char *local_node, unsigned stream_timeout_ms,
                              struct s3_backend **out);
void s3_backend_cluster_destroy(struct s3_backend *be);

/* ---------------------------------------------------------------- server */

struct s3_config {
	const char *listen;     /* host:port, port 0 picks one */
	const char *metrics;    /* host:port of /metrics (its own port); NULL: none */
	const char *access_key; /* NULL: anonymous */
	const char *secret_key;
	const char *region;
	const char *domain; /* virtual-host base ("s3.example.com"), NULL: path style only */
	const char *tls_cert, *tls_key;
	unsigned threads;           /* event loops (accept, readiness, timeouts); 0: 2 */
	unsigned workers;           /* threads that serve requests (may block); 0: 16 */
	size_t max_header;          /* request head limit; 0: 16 KiB */
	unsigned header_timeout_ms; /* 0: 10 s */
	unsigned idle_timeout_ms;   /* 0: 60 s */
	uint64_t max_object;        /* 0: 5 TiB */
	unsigned max_conns;         /* open connections; more are refused. 0: 4096 */
	enum s3_md5_mode {
		S3_MD5_AUTO,   /* multi where the CPU has AVX2, else serial */
		S3_MD5_SERIAL, /* each upload's MD5 on its worker thread (OpenSSL) */
		S3_MD5_MULTI,  /* concurrent uploads' MD5 in AVX2 lanes (s3_md5mb) */
	} md5;
};

struct s3_server;

/* Bind and prepare; the backend is borrowed for the server's life. 0 or -errno. */
int s3_server_create(const struct s3_config *cfg, const struct s3_backend *be,
                     struct s3_server **out);
/* The bound port (useful with port 0). */
int s3_server_port(const struct s3_server *srv);
int s3_server_metrics_port(const struct s3_server *srv);
/* Serve until s3_server_stop(); runs the event loops on this thread and helper threads. */
int s3_server_run(struct s3_server *srv);
/* Ask run() to return; safe from a signal handler or any thread. */
void s3_server_stop(struct s3_server *srv);
void s3_server_destroy(struct s3_server *srv);

/* The zest-s3gw program: parse flags, build the server over be (NULL: the rpc backend
 * over the --datanode list, or the cluster backend with --cluster; one is required). */
int s3_main(int argc, char **argv, const struct s3_backend *be);

#endif
