/*
 * s3_server: the HTTP/1.1 front of the gateway.
 *
 * A few event loops (epoll, level-triggered for the listening sockets, one-shot for
 * connections) accept, watch readiness and enforce timeouts; a pool of worker threads
 * serves requests. A readable connection is queued to the workers and disarmed until the
 * worker is done with it, so one worker at a time owns a connection and may block on the
 * backend without stalling anyone else.
 *
 * No worker waits on a slow reader of a GET body: the operation hands the server a backend
 * stream (s3_resp_stream) and the worker writes it without blocking; when the socket is
 * full the connection parks (C_SEND, armed for EPOLLOUT) holding one segment, nothing
 * pulls the stream, so it pauses and HTTP/2 flow control stops the datanode; a loop hands
 * the connection back to a worker once the socket drains. Answers given with no request
 * body left to read (heads, errors, XML) park the same way, their unsent rest kept in
 * obuf; only answers given while a body is still coming (errors mid-upload, 100 Continue)
 * and /metrics are written with waits bounded by the idle timeout.
 *
 * A connection reads into a reference-counted read buffer (struct rbuf), taken only while
 * bytes are in flight. Payload handed to the operations is a span of that buffer plus a
 * reference on it; when a consumer keeps a reference past the call, the connection moves
 * on to a fresh buffer rather than overwriting bytes still in use. Memory per connection
 * is bounded by RBUF_SIZE times the buffers a backend holds (its in-flight window), plus
 * small per-request state; --max-conns bounds the connections.
 *
 * s3_server_internal.h: what the server's files share. Private to s3gw/.
 *   s3_server.c    the workers, accept, timeouts, the event loops, setup and teardown
 *   s3_conn.c      a connection's request state machine: head, body, answer, parking
 *   s3_conn_io.c   socket and TLS reads and writes; the s3_resp_* answers of s3_internal.h
 *   s3_metrics.c   the gateway's counters and /metrics
 */
#ifndef ZEST_S3_SERVER_INTERNAL_H
#define ZEST_S3_SERVER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <sys/epoll.h>

#include <openssl/ssl.h>

#include "s3_internal.h"
#include "s3_xml_internal.h"

#define RBUF_SIZE   (256u * 1024u)
#define MAX_LOOPS   16
#define MAX_WORKERS 256
#define LAT_BUCKETS 10
/* A refused request's body is read and discarded up to this, to keep the connection. */
#define DRAIN_MAX (64u << 20)

/* A connection's events while a worker does not hold it. */
#define CONN_EVENTS (EPOLLIN | EPOLLRDHUP | EPOLLONESHOT)

/* The gateway's counters (s3_metrics.c renders them). */
struct s3_gw_metrics {
	atomic_ulong req[S3_OP_COUNT][6]; /* by status class 1xx..5xx, [0] unused */
	atomic_ulong lat[S3_OP_COUNT][LAT_BUCKETS + 1];
	atomic_ulong lat_sum_us[S3_OP_COUNT];
	atomic_ulong copied[S3_COPY_STAGES];
	atomic_ulong bytes_in, bytes_out;
	atomic_ulong payload_mode[5];
	atomic_long conns;
};
extern struct s3_gw_metrics s3_metrics;

/* ------------------------------------------------------------------ structures */

struct rbuf {
	struct zc_ref ref;
	size_t cap;
	uint8_t data[];
};

static void
rbuf_release(struct zc_ref *ref)
{
	free((struct rbuf *)ref);
}

static inline struct rbuf *
rbuf_new(void)
{
	struct rbuf *b = malloc(sizeof(*b) + RBUF_SIZE);

	if (!b)
		return NULL;
	zc_ref_init(&b->ref, rbuf_release);
	b->cap = RBUF_SIZE;
	return b;
}

/* C_SEND: a GET body streams from the backend (s3_resp_stream); the connection reads
 * nothing more until it is sent. */
enum conn_state { C_HEAD, C_BODY, C_DRAIN, C_SEND };

struct loop;

struct s3_conn {
	pthread_mutex_t mu; /* held by whoever works on the connection */
	atomic_bool queued; /* handed to the workers, not yet picked up */
	struct s3_conn *qnext;
	bool no_wait; /* writes give up instead of waiting (timeout path) */
	int fd;
	SSL *ssl;
	struct loop *loop;
	struct s3_conn *prev, *next;
	bool is_metrics, closing;
	struct rbuf *rb;
	size_t rstart, rend;
	enum conn_state state;
	uint64_t head_start_ns, last_ns;
	bool in_request;
	struct s3_req rq;
	/* body framing */
	bool chunked;
	struct s3_http_chunked hc;
	uint64_t body_left; /* raw bytes left when Content-Length framed */
	bool continue_sent;
	/* C_SEND: the backend stream, the segment being written (its ref held) and how much
	 * of it went out; want_in: TLS needs to read before it can write again */
	void *gstream;
	struct zc_seg gseg;
	size_t gdone;
	bool want_in;
	/* an answer (head, XML) the socket did not take at once, sent before the stream;
	 * defer_ok: the server lets answers wait there (no request body left to read) */
	char *obuf;
	size_t olen, odone;
	bool defer_ok;
	int outq; /* unsent bytes in the socket when the timeouts last looked */
};

struct loop {
	struct s3_server *srv;
	int epfd;
	pthread_t thread;
	pthread_mutex_t lock; /* the conns list */
	struct s3_conn *conns;
};

struct s3_server {
	struct s3_config cfg;
	const struct s3_backend *be;
	int lfd, mfd, stopfd;
	unsigned port, mport;
	SSL_CTX *tls;
	unsigned nloops;
	struct loop loops[MAX_LOOPS];
	atomic_uint req_seq;
	/* work queue: connections with bytes to read, served by the worker threads */
	pthread_mutex_t qlock;
	pthread_cond_t qcond;
	struct s3_conn *qhead, *qtail;
	bool stopping;
	unsigned nworkers;
	pthread_t workers[MAX_WORKERS];
	struct s3_md5mb *md5mb; /* NULL: MD5 serial on the workers */
};

/* ---- s3_metrics.c */
void s3_metric_request(enum s3_op op, int status, uint64_t ns);
void s3_metrics_render(struct s3_buf *b);
void s3_metrics_render_md5(struct s3_buf *b, struct s3_md5mb *mb); /* mb NULL: zeros */
/* ---- s3_conn_io.c */
long s3_conn_read(struct s3_conn *c, void *buf, size_t n);
int s3_conn_write(struct s3_conn *c, const void *p, size_t n, bool more);
long s3_conn_write_nb(struct s3_conn *c, const void *p, size_t n, bool more);
/* ---- s3_conn.c */
void s3_conn_unlink(struct s3_conn *c);
void s3_conn_destroy(struct s3_conn *c);
void s3_conn_close(struct s3_conn *c);
void s3_conn_send_error(struct s3_conn *c, enum s3_err err);
bool s3_conn_serve(struct s3_conn *c);
void s3_conn_arm(struct s3_conn *c);

#endif
