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
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <linux/sockios.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "s3_internal.h"
#include "zc.h"
#include "zc_net.h"

#define RBUF_SIZE   (256u * 1024u)
#define MAX_LOOPS   16
#define MAX_WORKERS 256
#define LAT_BUCKETS 10
/* A refused request's body is read and discarded up to this, to keep the connection. */
#define DRAIN_MAX (64u << 20)

static const double lat_bounds[LAT_BUCKETS] = { 0.001, 0.0025, 0.005, 0.01, 0.025,
	                                        0.05,  0.1,    0.5,   1.0,  5.0 };

/* ------------------------------------------------------------------ metrics */

static struct {
	atomic_ulong req[S3_OP_COUNT][6]; /* by status class 1xx..5xx, [0] unused */
	atomic_ulong lat[S3_OP_COUNT][LAT_BUCKETS + 1];
	atomic_ulong lat_sum_us[S3_OP_COUNT];
	atomic_ulong copied[S3_COPY_STAGES];
	atomic_ulong bytes_in, bytes_out;
	atomic_ulong payload_mode[5];
	atomic_long conns;
} metrics;

static const char *const op_names[S3_OP_COUNT] = {
	"unknown",       "list_buckets",   "create_bucket", "delete_bucket", "head_bucket",
	"bucket_meta",   "list_objects",   "put_object",    "get_object",    "head_object",
	"delete_object", "delete_objects", "mpu_create",    "mpu_part",      "mpu_complete",
	"mpu_abort",     "mpu_list",
};

static const char *const copy_stage_names[S3_COPY_STAGES] = { "rbuf_carry", "xml_collect" };

const char *
s3_op_name(enum s3_op op)
{
	return (unsigned)op < S3_OP_COUNT ? op_names[op] : "unknown";
}

void
s3_metric_copied(enum s3_copy_stage stage, uint64_t bytes)
{
	atomic_fetch_add_explicit(&metrics.copied[stage], bytes, memory_order_relaxed);
}

void
s3_metric_payload(enum s3_payload mode)
{
	if ((unsigned)mode < 5)
		atomic_fetch_add_explicit(&metrics.payload_mode[mode], 1, memory_order_relaxed);
}

static void
metric_request(enum s3_op op, int status, uint64_t ns)
{
	double s = (double)ns / 1e9;
	unsigned b = 0;

	if (status >= 100 && status < 600)
		atomic_fetch_add_explicit(&metrics.req[op][status / 100], 1, memory_order_relaxed);
	while (b < LAT_BUCKETS && s > lat_bounds[b])
		b++;
	atomic_fetch_add_explicit(&metrics.lat[op][b], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&metrics.lat_sum_us[op], ns / 1000, memory_order_relaxed);
}

static void
metrics_render(struct s3_buf *b)
{
	s3_buf_adds(b, "# HELP zest_s3_requests_total S3 requests answered, by operation and "
	               "status class.\n"
	               "# TYPE zest_s3_requests_total counter\n");
	for (unsigned op = 0; op < S3_OP_COUNT; op++)
		for (unsigned c = 1; c < 6; c++) {
			unsigned long v = atomic_load(&metrics.req[op][c]);

			if (v)
				s3_buf_printf(
				        b, "zest_s3_requests_total{op=\"%s\",code=\"%ux\"} %lu\n",
				        op_names[op], c, v);
		}
	s3_buf_adds(b, "# HELP zest_s3_request_seconds S3 request latency, head received to "
	               "response sent, by operation.\n"
	               "# TYPE zest_s3_request_seconds histogram\n");
	for (unsigned op = 0; op < S3_OP_COUNT; op++) {
		unsigned long cum = 0;

		for (unsigned k = 0; k <= LAT_BUCKETS; k++)
			cum += atomic_load(&metrics.lat[op][k]);
		if (!cum)
			continue;
		cum = 0;
		for (unsigned k = 0; k <= LAT_BUCKETS; k++) {
			cum += atomic_load(&metrics.lat[op][k]);
			if (k < LAT_BUCKETS)
				s3_buf_printf(
				        b,
				        "zest_s3_request_seconds_bucket{op=\"%s\",le=\"%g\"} %lu\n",
				        op_names[op], lat_bounds[k], cum);
			else
				s3_buf_printf(b,
				              "zest_s3_request_seconds_bucket{op=\"%s\",le=\"+"
				              "Inf\"} %lu\n",
				              op_names[op], cum);
		}
		s3_buf_printf(b, "zest_s3_request_seconds_sum{op=\"%s\"} %.6f\n", op_names[op],
		              (double)atomic_load(&metrics.lat_sum_us[op]) / 1e6);
		s3_buf_printf(b, "zest_s3_request_seconds_count{op=\"%s\"} %lu\n", op_names[op],
		              cum);
	}
	s3_buf_adds(b, "# HELP zest_payload_copied_bytes_total Payload bytes copied in user space, "
	               "by stage.\n"
	               "# TYPE zest_payload_copied_bytes_total counter\n");
	for (unsigned s = 0; s < S3_COPY_STAGES; s++)
		s3_buf_printf(b, "zest_payload_copied_bytes_total{stage=\"%s\"} %lu\n",
		              copy_stage_names[s], atomic_load(&metrics.copied[s]));
	s3_buf_printf(b,
	              "# HELP zest_s3_payload_bytes_total Object payload bytes received (in) and "
	              "sent (out).\n"
	              "# TYPE zest_s3_payload_bytes_total counter\n"
	              "zest_s3_payload_bytes_total{dir=\"in\"} %lu\n"
	              "zest_s3_payload_bytes_total{dir=\"out\"} %lu\n",
	              atomic_load(&metrics.bytes_in), atomic_load(&metrics.bytes_out));
	{
		static const char *const modes[5] = { "sha256", "unsigned", "streaming-signed",
			                              "streaming-signed-trailer",
			                              "streaming-unsigned-trailer" };

		s3_buf_adds(b, "# HELP zest_s3_uploads_by_payload_total Uploads by "
		               "x-amz-content-sha256 mode.\n"
		               "# TYPE zest_s3_uploads_by_payload_total counter\n");
		for (unsigned i = 0; i < 5; i++)
			s3_buf_printf(b, "zest_s3_uploads_by_payload_total{mode=\"%s\"} %lu\n",
			              modes[i], atomic_load(&metrics.payload_mode[i]));
	}
	s3_buf_printf(b,
	              "# HELP zest_s3_connections Open client connections.\n"
	              "# TYPE zest_s3_connections gauge\nzest_s3_connections %ld\n",
	              atomic_load(&metrics.conns));
	s3_buf_printf(
	        b,
	        "# HELP zest_zc_refs_live Payload references alive in the gateway (0 when idle).\n"
	        "# TYPE zest_zc_refs_live gauge\nzest_zc_refs_live %ld\n",
	        zc_ref_live());
}

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

static struct rbuf *
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
};

/* ------------------------------------------------------------------ socket I/O */

static long
conn_read(struct s3_conn *c, void *buf, size_t n)
{
	if (c->ssl) {
		int r;

		/* SSL_get_error reads this thread's error queue: it must start empty, and
		 * workers serve many connections */
		ERR_clear_error();
		r = SSL_read(c->ssl, buf, (int)(n > INT32_MAX ? INT32_MAX : n));

		if (r > 0)
			return r;
		switch (SSL_get_error(c->ssl, r)) {
		case SSL_ERROR_WANT_READ:
			return -EAGAIN;
		case SSL_ERROR_WANT_WRITE: {
			struct pollfd p = { c->fd, POLLOUT, 0 };

			poll(&p, 1, 1000);
			return -EAGAIN;
		}
		case SSL_ERROR_ZERO_RETURN:
			return 0;
		default:
			ERR_clear_error();
			return -ECONNRESET;
		}
	}
	for (;;) {
		ssize_t r = read(c->fd, buf, n);

		if (r >= 0)
			return r;
		if (errno == EINTR)
			continue;
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	}
}

static int
wait_fd(struct s3_conn *c, short ev)
{
	struct pollfd p = { c->fd, ev, 0 };
	const struct s3_config *cfg = &c->loop->srv->cfg;
	int r;

	if (c->no_wait)
		return -EAGAIN;
	do
		r = poll(&p, 1, (int)cfg->idle_timeout_ms);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return -ETIMEDOUT;
	if (r < 0)
		return -errno;
	if (p.revents & (POLLERR | POLLHUP | POLLNVAL))
		return -EPIPE;
	return 0;
}

static int
conn_write(struct s3_conn *c, const void *p, size_t n, bool more)
{
	const uint8_t *b = p;

	if (c->obuf) { /* what was deferred goes first */
		char *o = c->obuf;
		size_t at = c->odone, len = c->olen;
		int rc;

		c->obuf = NULL;
		c->olen = c->odone = 0;
		rc = conn_write(c, o + at, len - at, more || n > 0);
		free(o);
		if (rc)
			return rc;
	}
	while (n) {
		long w;

		if (c->ssl) {
			int r;

			ERR_clear_error();
			r = SSL_write(c->ssl, b, (int)(n > (1u << 30) ? (1u << 30) : n));

			if (r > 0) {
				w = r;
			} else {
				int e = SSL_get_error(c->ssl, r);

				ERR_clear_error();
				if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
					int rc = wait_fd(c, e == SSL_ERROR_WANT_WRITE ? POLLOUT
					                                              : POLLIN);

					if (rc)
						return rc;
					continue;
				}
				return -EPIPE;
			}
		} else {
			w = send(c->fd, b, n, MSG_NOSIGNAL | (more ? MSG_MORE : 0));
			if (w < 0) {
				if (errno == EINTR)
					continue;
				if (errno == EAGAIN || errno == EWOULDBLOCK) {
					int rc = wait_fd(c, POLLOUT);

					if (rc)
						return rc;
					continue;
				}
				return -errno;
			}
		}
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

/* One write without waiting: bytes written, -EAGAIN when the socket is full (c->want_in:
 * TLS must read first), or -errno. TLS retries pass the same bytes, as SSL_write wants. */
static long
conn_write_nb(struct s3_conn *c, const void *p, size_t n, bool more)
{
	c->want_in = false;
	if (c->ssl) {
		int r, e;

		ERR_clear_error();
		r = SSL_write(c->ssl, p, (int)(n > (1u << 30) ? (1u << 30) : n));
		if (r > 0)
			return r;
		e = SSL_get_error(c->ssl, r);
		ERR_clear_error();
		if (e == SSL_ERROR_WANT_WRITE)
			return -EAGAIN;
		if (e == SSL_ERROR_WANT_READ) {
			c->want_in = true;
			return -EAGAIN;
		}
		return -EPIPE;
	}
	for (;;) {
		ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT | (more ? MSG_MORE : 0));

		if (w >= 0)
			return w;
		if (errno == EINTR)
			continue;
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	}
}

/*
 * Send a whole answer part held in b. When the server allows it (c->defer_ok), whatever the
 * socket does not take at once stays in c->obuf (b's memory, taken over: no copy) and
 * send_step writes it later without holding the worker; else a bounded blocking write.
 */
static int
conn_send_buf(struct s3_conn *c, struct s3_buf *b, bool more)
{
	long w = 0;

	if (!c->defer_ok)
		return conn_write(c, b->p, b->len, more);
	if (c->obuf) { /* rare (two parts): keep the order, append */
		char *o = realloc(c->obuf, c->olen + b->len);

		if (!o)
			return -ENOMEM;
		memcpy(o + c->olen, b->p, b->len);
		c->obuf = o;
		c->olen += b->len;
		return 0;
	}
	if (b->len)
		w = conn_write_nb(c, b->p, b->len, more);
	if (w == -EAGAIN)
		w = 0;
	if (w < 0)
		return (int)w;
	if ((size_t)w < b->len) {
		c->obuf = b->p;
		c->olen = b->len;
		c->odone = (size_t)w;
		b->p = NULL;
		b->len = b->cap = 0;
	}
	return 0;
}

/* ------------------------------------------------------------------ responses */

static const char *
reason(int status)
{
	switch (status) {
	case 100:
		return "Continue";
	case 200:
		return "OK";
	case 204:
		return "No Content";
	case 206:
		return "Partial Content";
	case 304:
		return "Not Modified";
	case 400:
		return "Bad Request";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 408:
		return "Request Timeout";
	case 409:
		return "Conflict";
	case 411:
		return "Length Required";
	case 412:
		return "Precondition Failed";
	case 416:
		return "Requested Range Not Satisfiable";
	case 431:
		return "Request Header Fields Too Large";
	case 500:
		return "Internal Server Error";
	case 501:
		return "Not Implemented";
	case 503:
		return "Service Unavailable";
	case 505:
		return "HTTP Version Not Supported";
	default:
		return "Unknown";
	}
}

static void
http_date(char *out, size_t cap)
{
	time_t t = time(NULL);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, cap, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

static void
build_head(struct s3_req *rq, struct s3_buf *h, int status, const struct s3_buf *extra,
           uint64_t clen)
{
	struct s3_conn *c = rq->conn;
	char date[64];

	/* An answer before the body was asked for closes the connection when the client waits
	 * for 100 or the body is big (begin_request): say so, or a client reusing the
	 * connection races our FIN (botocore then reports "400 None" for its next request). */
	if (c && c->state == C_HEAD && !c->continue_sent && (c->chunked || c->body_left > 0) &&
	    (rq->http.expect_continue || c->body_left > (64u << 20)))
		rq->close = true;
	http_date(date, sizeof(date));
	s3_buf_printf(h,
	              "HTTP/1.1 %d %s\r\nServer: zest-s3gw\r\nDate: %s\r\nx-amz-request-id: %s\r\n"
	              "x-amz-id-2: %s\r\n",
	              status, reason(status), date, rq->id, rq->id);
	if (extra && extra->len)
		s3_buf_add(h, extra->p, extra->len);
	if (status != 204 && status != 304)
		s3_buf_printf(h, "Content-Length: %lu\r\n", (unsigned long)clen);
	if (rq->close)
		s3_buf_adds(h, "Connection: close\r\n");
	s3_buf_adds(h, "\r\n");
}

int
s3_resp_head(struct s3_req *rq, int status, const struct s3_buf *extra, uint64_t clen)
{
	struct s3_buf h;
	int rc;

	if (rq->head_sent)
		return -EALREADY;
	if (!rq->http.keep_alive)
		rq->close = true;
	s3_buf_init(&h, 64 * 1024);
	build_head(rq, &h, status, extra, clen);
	rq->head_sent = true;
	rq->status = status;
	rc = h.err ? h.err : conn_send_buf(rq->conn, &h, clen > 0 && !rq->is_head);
	s3_buf_fini(&h);
	if (rc)
		rq->close = true;
	return rc;
}

int
s3_resp_data(struct s3_req *rq, const void *p, size_t n)
{
	int rc;

	if (rq->is_head)
		return 0;
	rc = conn_write(rq->conn, p, n, false);
	if (rc)
		rq->close = true;
	else
		atomic_fetch_add_explicit(&metrics.bytes_out, n, memory_order_relaxed);
	return rc;
}

int
s3_resp_stream(struct s3_req *rq, void *stream)
{
	struct s3_conn *c = rq->conn;

	if (rq->is_head || c->gstream) {
		rq->be->get_close(stream);
		return 0;
	}
	c->gstream = stream;
	c->gseg = (struct zc_seg){ 0 };
	c->gdone = 0;
	return 0;
}

int
s3_resp_xml(struct s3_req *rq, int status, const struct s3_buf *extra, const struct s3_buf *xml)
{
	struct s3_buf h, ex;
	size_t blen = xml ? xml->len : 0;
	int rc;

	if (rq->head_sent)
		return -EALREADY;
	if (!rq->http.keep_alive)
		rq->close = true;
	s3_buf_init(&ex, 64 * 1024);
	if (extra && extra->len)
		s3_buf_add(&ex, extra->p, extra->len);
	if (blen)
		s3_buf_adds(&ex, "Content-Type: application/xml\r\n");
	s3_buf_init(&h, 64 * 1024 + blen);
	build_head(rq, &h, status, &ex, blen);
	if (blen && !rq->is_head)
		s3_buf_add(&h, xml->p, blen);
	rq->head_sent = true;
	rq->status = status;
	rc = h.err ? h.err : conn_send_buf(rq->conn, &h, false);
	s3_buf_fini(&h);
	s3_buf_fini(&ex);
	if (rc)
		rq->close = true;
	return rc;
}

int
s3_resp_error(struct s3_req *rq, enum s3_err err, const char *msg)
{
	const struct s3_err_info *ei = s3_err_info(err);
	struct s3_buf x;
	int rc;

	if (rq->head_sent) {
		rq->close = true; /* cannot change an answer already under way */
		return -EALREADY;
	}
	s3_buf_init(&x, 16 * 1024);
	if (ei->http != 304)
		s3_xml_error(&x, ei->code, msg ? msg : ei->message,
		             rq->resource ? rq->resource : "/", rq->id);
	ZC_DBG("s3", "request=%s op=%s error=%s status=%d%s", rq->id, s3_op_name(rq->op), ei->code,
	       ei->http, rq->conn && !rq->conn->loop->srv->cfg.access_key ? " anonymous=1" : "");
	rc = s3_resp_xml(rq, ei->http, NULL, ei->http == 304 ? NULL : &x);
	s3_buf_fini(&x);
	return rc;
}

/* ------------------------------------------------------------------ connections */

/* Drop a GET body stream and the segment in hand (the connection's owner). */
static void
stream_release(struct s3_conn *c)
{
	if (c->gseg.ref)
		zc_ref_put(c->gseg.ref);
	c->gseg = (struct zc_seg){ 0 };
	c->gdone = 0;
	if (c->gstream)
		c->rq.be->get_close(c->gstream);
	c->gstream = NULL;
	free(c->obuf);
	c->obuf = NULL;
	c->olen = c->odone = 0;
}

/* Take c off its loop's list; the caller holds l->lock. */
static void
conn_unlink(struct s3_conn *c)
{
	struct loop *l = c->loop;

	if (c->prev)
		c->prev->next = c->next;
	else
		l->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
}

/* Release everything of an unlinked connection; the caller holds c->mu. */
static void
conn_destroy(struct s3_conn *c)
{
	struct loop *l = c->loop;

	stream_release(c);
	if (c->in_request) {
		s3_ops_abort(&c->rq, S3_OK);
		s3_req_fini(&c->rq);
		c->in_request = false;
	}
	epoll_ctl(l->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	if (c->ssl) {
		ERR_clear_error();
		SSL_shutdown(c->ssl);
		SSL_free(c->ssl);
		ERR_clear_error();
	}
	close(c->fd);
	if (c->rb)
		zc_ref_put(&c->rb->ref);
	atomic_fetch_sub(&metrics.conns, 1);
	pthread_mutex_unlock(&c->mu);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

/* Close and free c; the caller holds c->mu (released here). */
static void
conn_close(struct s3_conn *c)
{
	struct loop *l = c->loop;

	pthread_mutex_lock(&l->lock);
	conn_unlink(c);
	pthread_mutex_unlock(&l->lock);
	conn_destroy(c);
}

static void
request_done(struct s3_conn *c)
{
	struct s3_req *rq = &c->rq;

	metric_request(rq->op, rq->status, zc_now_ns() - rq->start_ns);
	/* the access log (ZEST_LOG=debug); an open gateway marks every line */
	ZC_DBG("s3", "request=%s op=%s status=%d us=%llu%s", rq->id, s3_op_name(rq->op), rq->status,
	       (unsigned long long)((zc_now_ns() - rq->start_ns) / 1000),
	       c->loop->srv->cfg.access_key ? "" : " anonymous=1");
	if (rq->close)
		c->closing = true;
	s3_req_fini(rq);
	c->in_request = false;
	c->state = C_HEAD;
	/* idle time counts from the end of the answer, however long sending it took */
	c->head_start_ns = c->last_ns = zc_now_ns();
}

/*
 * Write a GET body from its backend stream until it ends or the socket is full. Never waits
 * on the client: returns true when parked (the caller arms EPOLLOUT and the worker moves
 * on; the stream, paused at its bound, stops the datanode through HTTP/2 flow control),
 * false when the response is over (request_done ran). It may wait on the backend for the
 * next segment: the datanode, not the client, sets that pace. The bytes are the gRPC
 * slices themselves (a ref per segment), never copied.
 */
static bool
send_step(struct s3_conn *c)
{
	struct s3_req *rq = &c->rq;

	for (;;) {
		int rc;

		if (c->obuf) {
			long w = conn_write_nb(c, c->obuf + c->odone, c->olen - c->odone,
			                       c->gstream != NULL);

			if (w == -EAGAIN)
				return true;
			if (w < 0) {
				rq->close = true;
				break;
			}
			c->odone += (size_t)w;
			c->last_ns = zc_now_ns();
			if (c->odone == c->olen) {
				free(c->obuf);
				c->obuf = NULL;
				c->olen = c->odone = 0;
			}
			continue;
		}
		if (c->gdone < c->gseg.len) {
			long w = conn_write_nb(c, (const uint8_t *)c->gseg.ptr + c->gdone,
			                       c->gseg.len - c->gdone, false);

			if (w == -EAGAIN)
				return true;
			if (w < 0) {
				rq->close = true;
				break;
			}
			c->gdone += (size_t)w;
			c->last_ns = zc_now_ns(); /* progress, however slow, is not idleness */
			atomic_fetch_add_explicit(&metrics.bytes_out, (unsigned long)w,
			                          memory_order_relaxed);
			continue;
		}
		if (c->gseg.ref)
			zc_ref_put(c->gseg.ref);
		c->gseg = (struct zc_seg){ 0 };
		c->gdone = 0;
		if (!c->gstream)
			break;
		rc = rq->be->get_next(c->gstream, &c->gseg);
		if (rc == 0)
			break;
		if (rc < 0) {
			rq->close = true; /* the body stopped short: the client must see it */
			break;
		}
	}
	stream_release(c);
	request_done(c);
	return false;
}

/* The answer was given: end the request, or park until a deferred part is out. */
static void
finish_answer(struct s3_conn *c)
{
	c->defer_ok = false;
	if (c->gstream || c->obuf) {
		c->state = C_SEND;
		send_step(c);
		return;
	}
	request_done(c);
}

/* Raw (HTTP-decoded) body bytes: through aws-chunked if present, then to the operation. */
static int
body_raw(void *arg, const uint8_t *p, size_t n)
{
	struct s3_conn *c = arg;
	struct s3_req *rq = &c->rq;

	if (c->state == C_DRAIN || n == 0)
		return 0;
	atomic_fetch_add_explicit(&metrics.bytes_in, n, memory_order_relaxed);
	if (rq->aws_chunked) {
		long r;

		if (rq->aws.done)
			return -EINVAL; /* bytes after the final aws chunk */
		r = s3_chunked_feed(&rq->aws, p, n, (s3_span_fn)s3_ops_body, rq);
		if (r < 0)
			return (int)r;
		if ((size_t)r != n)
			return -EINVAL;
		return 0;
	}
	return s3_ops_body(rq, p, n);
}

static enum s3_err
body_err(struct s3_req *rq, int rc)
{
	if (rc == -EBADMSG && rq->aws_chunked)
		return S3E_SIGNATURE_DOES_NOT_MATCH;
	if (rc == -EINVAL || rc == -EMSGSIZE || rc == -EOVERFLOW)
		return S3E_INCOMPLETE_BODY;
	if (rc == -EFBIG && rq->body_size_known)
		return S3E_INCOMPLETE_BODY; /* a chunk past x-amz-decoded-content-length */
	return s3_err_from_errno(rc);
}

/* Malformed framing (a bad or 64-bit-overflowing chunk size, a missing CRLF) gets the
 * message S3 gives it, not the Content-Length one. */
static const char *
body_msg(int rc)
{
	return rc == -EINVAL || rc == -EOVERFLOW ? "The request body terminated unexpectedly"
	                                         : NULL;
}

/*
 * Cap a chunked body as a Content-Length one is capped when the request begins: uploads
 * at --max-object, parts at S3's 5 GiB, collected XML at S3_XML_BODY_MAX. The decoder
 * refuses a chunk-size line that would pass the cap (-EFBIG, EntityTooLarge) before
 * reading a byte of it; the aws-chunked decoder counts decoded payload, the HTTP one the
 * bytes it carries, so only the innermost framing is capped. A declared
 * x-amz-decoded-content-length (checked against the cap already) is the cap of its
 * aws-chunks, and a chunk past it makes the body IncompleteBody, as S3 answers.
 */
static void
body_caps(struct s3_conn *c)
{
	struct s3_req *rq = &c->rq;
	uint64_t cap;

	if (rq->body_mode == S3_BODY_COLLECT)
		cap = S3_XML_BODY_MAX;
	else if (rq->op == S3_OP_MPU_PART)
		cap = S3_PART_MAX_SIZE;
	else
		cap = rq->cfg->max_object;
	if (rq->aws_chunked)
		rq->aws.max = rq->body_size_known ? rq->body_expected : cap;
	else if (c->chunked)
		c->hc.max = cap;
}

static void
send_simple_error(struct s3_conn *c, enum s3_err err)
{
	struct s3_req *rq = &c->rq;

	memset(rq, 0, sizeof(*rq));
	rq->conn = c;
	rq->close = true;
	snprintf(rq->id, sizeof(rq->id), "%016X",
	         atomic_fetch_add(&c->loop->srv->req_seq, 1) * 2654435761u);
	s3_resp_error(rq, err, NULL);
	c->closing = true;
}

static void
serve_metrics(struct s3_conn *c)
{
	struct s3_req *rq = &c->rq;
	struct s3_buf b, ex;

	s3_buf_init(&b, 4 << 20);
	s3_buf_init(&ex, 256);
	if (c->rq.http.path_len == 8 && memcmp(c->rq.http.path, "/metrics", 8) == 0) {
		metrics_render(&b);
		s3_buf_adds(&ex, "Content-Type: text/plain; version=0.0.4\r\n");
		if (s3_resp_head(rq, 200, &ex, b.len) == 0)
			s3_resp_data(rq, b.p, b.len);
	} else {
		s3_resp_error(rq, S3E_NO_SUCH_KEY, "Only /metrics is served here");
	}
	s3_buf_fini(&b);
	s3_buf_fini(&ex);
}

/* Start a request whose head is parsed in c->rq.http. */
static void
send_continue(struct s3_conn *c)
{
	static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";

	if (conn_write(c, cont, sizeof(cont) - 1, false) != 0)
		c->closing = true;
	c->continue_sent = true;
}

static void
begin_request(struct s3_conn *c)
{
	struct s3_server *srv = c->loop->srv;
	struct s3_req *rq = &c->rq;
	bool has_body;

	rq->conn = c;
	rq->cfg = &srv->cfg;
	rq->be = srv->be;
	rq->creds.access_key = srv->cfg.access_key;
	rq->creds.secret_key = srv->cfg.secret_key;
	rq->creds.region = srv->cfg.region;
	rq->creds.domain = srv->cfg.domain;
	rq->start_ns = zc_now_ns();
	snprintf(rq->id, sizeof(rq->id), "%08X%08X", (unsigned)time(NULL),
	         atomic_fetch_add(&srv->req_seq, 1));
	rq->is_head = rq->http.method_len == 4 && memcmp(rq->http.method, "HEAD", 4) == 0;
	c->in_request = true;
	c->chunked = rq->http.chunked;
	c->body_left = rq->http.has_length ? rq->http.content_length : 0;
	c->continue_sent = false;
	if (c->chunked)
		s3_http_chunked_init(&c->hc);
	has_body = c->chunked || c->body_left > 0;

	/* with no body to read, an answer the socket cannot take at once may wait in obuf */
	c->defer_ok = !has_body && !c->is_metrics;
	if (c->is_metrics) {
		serve_metrics(c);
	} else if (s3_ops_begin(rq) < 0) {
		rq->close = true;
		if (!rq->head_sent)
			s3_resp_error(rq, S3E_INTERNAL, NULL);
	}
	if (c->gstream) {
		if (has_body)
			rq->close = true; /* a GET's request body is not read */
		finish_answer(c);
		return;
	}
	if (rq->head_sent) {
		if (!has_body) {
			finish_answer(c);
			return;
		}
		if (rq->http.expect_continue || c->body_left > DRAIN_MAX) {
			/* the client waits for us or the body is big: do not read it */
			rq->close = true;
			request_done(c);
			return;
		}
		/* discard the body, keep the connection; a chunked one only up to DRAIN_MAX */
		c->state = C_DRAIN;
		c->hc.max = DRAIN_MAX;
		return;
	}
	if (!has_body && rq->http.expect_continue) {
		/* Say 100 even for an empty body: botocore, answered at once with the final
		 * status, mis-frames its next request on the connection and waits out its read
		 * timeout (a zero-byte PUT followed by a large one stalled for 30 s). */
		send_continue(c);
	}
	if (!has_body && rq->body_mode != S3_BODY_NONE) {
		int rc = s3_ops_end(rq);

		if (rc < 0 && !rq->head_sent)
			s3_resp_error(rq, S3E_INTERNAL, NULL);
		finish_answer(c);
		return;
	}
	if (!has_body) {
		/* begin neither answered nor wants a body: a bug, answer anyway */
		s3_resp_error(rq, S3E_INTERNAL, NULL);
		finish_answer(c);
		return;
	}
	c->defer_ok = false;
	if (rq->body_mode == S3_BODY_NONE) {
		c->state = C_DRAIN; /* should not happen: ops answered without body */
		c->hc.max = DRAIN_MAX;
	} else {
		c->state = C_BODY;
		body_caps(c);
	}
	if (rq->http.expect_continue)
		send_continue(c);
}

/* Consume body bytes from the read buffer; returns false when the connection must close. */
static void
body_step(struct s3_conn *c)
{
	struct s3_req *rq = &c->rq;
	const uint8_t *p = c->rb->data + c->rstart;
	size_t avail = c->rend - c->rstart;
	bool complete = false;
	int rc = 0;

	rq->cur_ref = &c->rb->ref;
	if (c->chunked) {
		long r = s3_http_chunked_feed(&c->hc, p, avail, body_raw, c);

		if (r < 0) {
			rc = (int)r;
		} else {
			c->rstart += (size_t)r;
			complete = c->hc.done;
		}
	} else {
		size_t take = avail < c->body_left ? avail : (size_t)c->body_left;

		rc = body_raw(c, p, take);
		c->rstart += take;
		c->body_left -= take;
		complete = c->body_left == 0;
	}
	rq->cur_ref = NULL;
	if (rc < 0) {
		/* A length-framed body of moderate size is drained after the error answer:
		 * closing with unread bytes makes the kernel send RST, and the client then
		 * never reads the answer (seen with curl: a PUT into a missing bucket, whose
		 * NoSuchBucket comes from the datanode mid-body, ended as "HTTP 100"). */
		bool drain = c->state == C_BODY && !c->chunked && c->body_left <= DRAIN_MAX;

		if (c->state == C_BODY) {
			const char *msg = body_msg(rc);

			rq->close = !drain;
			s3_ops_abort(rq, msg ? S3_OK : body_err(rq, rc));
			if (msg && !rq->head_sent)
				s3_resp_error(rq, body_err(rq, rc), msg);
		}
		if (drain && rq->head_sent) {
			c->state = C_DRAIN;
			if (c->body_left == 0)
				request_done(c);
			return;
		}
		rq->close = true;
		request_done(c);
		return;
	}
	if (!complete)
		return;
	if (c->state == C_DRAIN) {
		request_done(c);
		return;
	}
	if (rq->aws_chunked && !rq->aws.done) {
		rq->close = true;
		s3_ops_abort(rq, S3E_INCOMPLETE_BODY);
		request_done(c);
		return;
	}
	c->defer_ok = true; /* the body is all read: the answer may wait for the socket */
	rc = s3_ops_end(rq);
	if (rc < 0 && !rq->head_sent)
		s3_resp_error(rq, S3E_INTERNAL, NULL);
	finish_answer(c);
}

static void
process(struct s3_conn *c)
{
	const struct s3_config *cfg = &c->loop->srv->cfg;

	while (!c->closing && c->rstart < c->rend && c->state != C_SEND) {
		if (c->state == C_HEAD) {
			struct s3_req *rq = &c->rq;
			int rc;

			memset(rq, 0, sizeof(*rq));
			rc = s3_http_parse(&rq->http, (const char *)c->rb->data + c->rstart,
			                   c->rend - c->rstart, cfg->max_header);
			if (rc == -EAGAIN)
				return;
			if (rc < 0) {
				/* -ENOTSUP: a well-formed HTTP/x.y that is not 1.0 or 1.1 */
				send_simple_error(c, rc == -EMSGSIZE  ? S3E_HEADER_TOO_LARGE
				                     : rc == -ENOTSUP ? S3E_HTTP_VERSION
				                                      : S3E_BAD_REQUEST);
				return;
			}
			/* the head must outlive buffer compaction: the request keeps its own copy
			 * (framing, not payload) */
			rq->head_copy = malloc(rq->http.head_len);
			if (!rq->head_copy) {
				send_simple_error(c, S3E_INTERNAL);
				return;
			}
			memcpy(rq->head_copy, c->rb->data + c->rstart, rq->http.head_len);
			c->rstart += rq->http.head_len;
			rc = s3_http_parse(&rq->http, rq->head_copy, rq->http.head_len,
			                   cfg->max_header);
			if (rc < 0) {
				free(rq->head_copy);
				rq->head_copy = NULL;
				send_simple_error(c, S3E_INTERNAL);
				return;
			}
			begin_request(c);
			if (c->rstart == c->rend && c->state == C_HEAD)
				break;
			continue;
		}
		body_step(c);
	}
	/* a body with no bytes left to read yet but already complete (chunked end seen) */
}

/* Make room in the read buffer; a buffer some consumer still references is left alone. */
static int
make_room(struct s3_conn *c)
{
	size_t left = c->rend - c->rstart;

	if (atomic_load(&c->rb->ref.refs) > 1) {
		struct rbuf *nb = rbuf_new();

		if (!nb)
			return -ENOMEM;
		memcpy(nb->data, c->rb->data + c->rstart, left);
		s3_metric_copied(S3_COPY_CARRY, left);
		zc_ref_put(&c->rb->ref);
		c->rb = nb;
	} else if (c->rstart) {
		memmove(c->rb->data, c->rb->data + c->rstart, left);
	}
	c->rstart = 0;
	c->rend = left;
	return 0;
}

/* Read and serve what the connection has; returns true when c was closed (and freed). */
static bool
on_readable(struct s3_conn *c)
{
	/* TLS may hold decrypted bytes the socket no longer signals: drain them too */
	for (int rounds = 0; (rounds < 64 || (c->ssl && SSL_pending(c->ssl) > 0)) && !c->closing;
	     rounds++) {
		long n;

		if (!c->rb) { /* buffers are taken when bytes come, so idle connections are small */
			c->rb = rbuf_new();
			c->rstart = c->rend = 0;
			if (!c->rb) {
				c->closing = true;
				break;
			}
		}
		if (c->rstart == c->rend && atomic_load(&c->rb->ref.refs) == 1)
			c->rstart = c->rend = 0;
		/* Appending after bytes a consumer still references is safe; only reusing
		 * space (compaction) needs a buffer of our own (make_room decides). */
		if (c->rend == c->rb->cap || (c->rstart > 0 && c->rb->cap - c->rend < 4096)) {
			if (make_room(c) < 0) {
				c->closing = true;
				break;
			}
			if (c->rend == c->rb->cap) {
				send_simple_error(c, S3E_HEADER_TOO_LARGE);
				break;
			}
		}
		n = conn_read(c, c->rb->data + c->rend, c->rb->cap - c->rend);
		if (n == -EAGAIN)
			break;
		if (n <= 0) {
			if (c->in_request && c->state == C_BODY) {
				c->rq.close = true;
				s3_ops_abort(&c->rq, S3E_INCOMPLETE_BODY);
				s3_req_fini(&c->rq);
				c->in_request = false;
			}
			c->closing = true;
			break;
		}
		if (c->state == C_HEAD && c->rstart == c->rend)
			c->head_start_ns = zc_now_ns();
		c->last_ns = zc_now_ns();
		c->rend += (size_t)n;
		process(c);
		if (c->state == C_SEND)
			break; /* read the next request once this answer is out */
	}
	if (c->closing) {
		conn_close(c);
		return true;
	}
	if (c->rb && !c->in_request && c->rstart == c->rend && atomic_load(&c->rb->ref.refs) == 1) {
		zc_ref_put(&c->rb->ref);
		c->rb = NULL;
		c->rstart = c->rend = 0;
	}
	return false;
}

#define CONN_EVENTS (EPOLLIN | EPOLLRDHUP | EPOLLONESHOT)

/* Serve a connection the loop handed over: a parked GET body first, then whatever was
 * read or is readable. Returns true when c was closed (and freed). */
static bool
serve(struct s3_conn *c)
{
	if (c->state == C_SEND) {
		if (send_step(c))
			return false;
		if (!c->closing)
			process(c); /* requests read before this answer ended (pipelining) */
		if (c->closing) {
			conn_close(c);
			return true;
		}
		if (c->state == C_SEND)
			return false;
	}
	return on_readable(c);
}

/* Re-arm c (one-shot): a parked GET waits to write, or under TLS maybe to read (not both:
 * a writable socket would wake a TLS write that is waiting for input again and again). */
static void
conn_arm(struct s3_conn *c)
{
	struct epoll_event ev = { .events = CONN_EVENTS, .data.ptr = c };

	if (c->state == C_SEND)
		ev.events = (c->want_in ? EPOLLIN : EPOLLOUT) | EPOLLONESHOT;
	epoll_ctl(c->loop->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

/* Worker threads: a connection whose socket became readable is served here, so a request
 * that blocks (a slow reader, a backend call) holds one worker, never an event loop. */
static void *
worker_run(void *arg)
{
	struct s3_server *srv = arg;

	for (;;) {
		struct s3_conn *c;

		pthread_mutex_lock(&srv->qlock);
		while (!srv->qhead && !srv->stopping)
			pthread_cond_wait(&srv->qcond, &srv->qlock);
		if (srv->stopping) {
			pthread_mutex_unlock(&srv->qlock);
			return NULL;
		}
		c = srv->qhead;
		srv->qhead = c->qnext;
		if (!srv->qhead)
			srv->qtail = NULL;
		pthread_mutex_unlock(&srv->qlock);

		pthread_mutex_lock(&c->mu);
		atomic_store(&c->queued, false);
		if (!serve(c)) {
			conn_arm(c);
			pthread_mutex_unlock(&c->mu);
		}
	}
}

static void
enqueue(struct s3_server *srv, struct s3_conn *c)
{
	atomic_store(&c->queued, true);
	pthread_mutex_lock(&srv->qlock);
	c->qnext = NULL;
	if (srv->qtail)
		srv->qtail->qnext = c;
	else
		srv->qhead = c;
	srv->qtail = c;
	pthread_cond_signal(&srv->qcond);
	pthread_mutex_unlock(&srv->qlock);
}

static void
on_accept(struct loop *l, int lfd, bool is_metrics)
{
	struct s3_server *srv = l->srv;

	for (int i = 0; i < 16; i++) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct s3_conn *c;
		struct epoll_event ev = { .events = CONN_EVENTS };
		int one = 1;

		if (fd < 0)
			return;
		if (atomic_load(&metrics.conns) >= (long)srv->cfg.max_conns) {
			static atomic_ulong last_warn_s;
			unsigned long now_s = (unsigned long)(zc_now_ns() / 1000000000u);

			if (atomic_exchange(&last_warn_s, now_s) !=
			    now_s) /* once a second at most */
				ZC_WARN("s3", "conns=%ld limit=%u action=refuse",
				        atomic_load(&metrics.conns), srv->cfg.max_conns);
			close(fd);
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		pthread_mutex_init(&c->mu, NULL);
		c->fd = fd;
		c->loop = l;
		c->is_metrics = is_metrics;
		c->head_start_ns = c->last_ns = zc_now_ns();
		if (srv->tls && !is_metrics) {
			c->ssl = SSL_new(srv->tls);
			if (!c->ssl) {
				pthread_mutex_destroy(&c->mu);
				free(c);
				close(fd);
				continue;
			}
			SSL_set_fd(c->ssl, fd);
			SSL_set_accept_state(c->ssl);
		}
		pthread_mutex_lock(&l->lock);
		c->next = l->conns;
		if (l->conns)
			l->conns->prev = c;
		l->conns = c;
		pthread_mutex_unlock(&l->lock);
		atomic_fetch_add(&metrics.conns, 1);
		ev.data.ptr = c;
		epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev);
	}
}

/* True when more than limit_ms passed since `since`. A worker may have stamped `since` after
 * `now` was read, so a `since` in the future is not elapsed time (the unsigned difference would
 * wrap to centuries and time out a busy connection mid-request). */
static bool
elapsed_over(uint64_t now, uint64_t since, unsigned limit_ms)
{
	return now > since && now - since > (uint64_t)limit_ms * 1000000u;
}

static void
check_timeouts(struct loop *l)
{
	const struct s3_config *cfg = &l->srv->cfg;
	struct s3_conn *c = l->conns, *next;
	uint64_t now;

	pthread_mutex_lock(&l->lock);
	for (c = l->conns; c; c = next) {
		next = c->next;
		/* a connection a worker holds or is about to hold is not idle */
		if (atomic_load(&c->queued) || pthread_mutex_trylock(&c->mu) != 0)
			continue;
		c->no_wait = true; /* the loop thread never waits on one client */
		now = zc_now_ns();
		if (c->state == C_SEND) {
			/* a parked answer whose socket queue moved has a client still reading,
			 * however slowly (EPOLLOUT waits until much of the send buffer drained) */
			int q;

			if (ioctl(c->fd, SIOCOUTQ, &q) == 0 && q != c->outq) {
				c->outq = q;
				c->last_ns = now;
			}
		}
		if (c->state == C_HEAD && c->rend > c->rstart &&
		    elapsed_over(now, c->head_start_ns, cfg->header_timeout_ms)) {
			send_simple_error(c, S3E_REQUEST_TIMEOUT);
			conn_unlink(c);
			conn_destroy(c);
		} else if (elapsed_over(now, c->last_ns, cfg->idle_timeout_ms)) {
			if (c->in_request && c->state == C_BODY) {
				c->rq.close = true;
				s3_ops_abort(&c->rq, S3E_REQUEST_TIMEOUT);
				s3_req_fini(&c->rq);
				c->in_request = false;
			}
			conn_unlink(c);
			conn_destroy(c);
		} else {
			c->no_wait = false;
			pthread_mutex_unlock(&c->mu);
		}
	}
	pthread_mutex_unlock(&l->lock);
}

static void *
loop_run(void *arg)
{
	struct loop *l = arg;
	struct s3_server *srv = l->srv;
	struct epoll_event evs[64];

	for (;;) {
		int n = epoll_wait(l->epfd, evs, 64, 250);

		for (int i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;

			if (p == &srv->stopfd)
				goto out;
			if (p == &srv->lfd)
				on_accept(l, srv->lfd, false);
			else if (p == &srv->mfd)
				on_accept(l, srv->mfd, true);
			else
				enqueue(srv, p);
		}
		check_timeouts(l);
	}
out:
	return NULL;
}

/* ------------------------------------------------------------------ setup */

int
s3_server_create(const struct s3_config *cfg, const struct s3_backend *be, struct s3_server **out)
{
	struct s3_server *srv = calloc(1, sizeof(*srv));
	int rc;

	if (!srv)
		return -ENOMEM;
	srv->cfg = *cfg;
	srv->be = be;
	srv->lfd = srv->mfd = srv->stopfd = -1;
	if (!srv->cfg.listen)
		srv->cfg.listen = "127.0.0.1:9000";
	if (!srv->cfg.region)
		srv->cfg.region = "us-east-1";
	if (!srv->cfg.threads)
		srv->cfg.threads = 2;
	if (srv->cfg.threads > MAX_LOOPS)
		srv->cfg.threads = MAX_LOOPS;
	if (!srv->cfg.max_header)
		srv->cfg.max_header = 16 * 1024;
	if (srv->cfg.max_header > RBUF_SIZE / 2)
		srv->cfg.max_header = RBUF_SIZE / 2;
	if (!srv->cfg.header_timeout_ms)
		srv->cfg.header_timeout_ms = 10000;
	if (!srv->cfg.idle_timeout_ms)
		srv->cfg.idle_timeout_ms = 60000;
	if (!srv->cfg.max_object)
		srv->cfg.max_object = 5ull << 40;
	if (!srv->cfg.max_conns)
		srv->cfg.max_conns = 4096;
	if (!srv->cfg.workers)
		srv->cfg.workers = 16;
	if (srv->cfg.workers > MAX_WORKERS)
		srv->cfg.workers = MAX_WORKERS;
	if ((srv->cfg.access_key == NULL) != (srv->cfg.secret_key == NULL)) {
		rc = -EINVAL;
		goto fail;
	}
	if (srv->cfg.tls_cert || srv->cfg.tls_key) {
		if (!srv->cfg.tls_cert || !srv->cfg.tls_key) {
			rc = -EINVAL;
			goto fail;
		}
		srv->tls = SSL_CTX_new(TLS_server_method());
		if (!srv->tls ||
		    SSL_CTX_use_certificate_chain_file(srv->tls, srv->cfg.tls_cert) != 1 ||
		    SSL_CTX_use_PrivateKey_file(srv->tls, srv->cfg.tls_key, SSL_FILETYPE_PEM) !=
		            1) {
			ZC_ERR("s3", "tls=cannot_load cert=%s key=%s", srv->cfg.tls_cert,
			       srv->cfg.tls_key);
			rc = -EINVAL;
			goto fail;
		}
		SSL_CTX_set_min_proto_version(srv->tls, TLS1_2_VERSION);
		SSL_CTX_set_mode(srv->tls, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	}
	/* datanodes started at the same time may take a moment to answer (each try waits
	 * up to 3 s in the backend): about 15 s in all */
	for (int tries = 0;; tries++) {
		rc = s3_ops_init_backend(be);
		if (rc != -EAGAIN || tries >= 5)
			break;
		if (tries == 0)
			ZC_INFO("s3", "backend=waiting reason=datanode_unavailable");
		nanosleep(&(struct timespec){ .tv_nsec = 100 * 1000000 }, NULL);
	}
	if (rc < 0) {
		ZC_ERR("s3", "backend=unavailable err=%d", rc);
		goto fail;
	}
	srv->lfd = zc_listen(srv->cfg.listen, 512, true, &srv->port);
	if (srv->lfd < 0) {
		rc = srv->lfd;
		goto fail;
	}
	if (srv->cfg.metrics) {
		srv->mfd = zc_listen(srv->cfg.metrics, 512, true, &srv->mport);
		if (srv->mfd < 0) {
			rc = srv->mfd;
			goto fail;
		}
	}
	srv->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (srv->stopfd < 0) {
		rc = -errno;
		goto fail;
	}
	srv->nloops = srv->cfg.threads;
	srv->nworkers = srv->cfg.workers;
	pthread_mutex_init(&srv->qlock, NULL);
	pthread_cond_init(&srv->qcond, NULL);
	for (unsigned i = 0; i < srv->nloops; i++) {
		struct loop *l = &srv->loops[i];
		struct epoll_event ev = { .events = EPOLLIN | EPOLLEXCLUSIVE };

		pthread_mutex_init(&l->lock, NULL);
		l->srv = srv;
		l->epfd = epoll_create1(EPOLL_CLOEXEC);
		if (l->epfd < 0) {
			rc = -errno;
			goto fail;
		}
		ev.data.ptr = &srv->lfd;
		epoll_ctl(l->epfd, EPOLL_CTL_ADD, srv->lfd, &ev);
		if (srv->mfd >= 0) {
			ev.data.ptr = &srv->mfd;
			epoll_ctl(l->epfd, EPOLL_CTL_ADD, srv->mfd, &ev);
		}
		ev.events = EPOLLIN;
		ev.data.ptr = &srv->stopfd;
		epoll_ctl(l->epfd, EPOLL_CTL_ADD, srv->stopfd, &ev);
	}
	*out = srv;
	return 0;
fail:
	s3_server_destroy(srv);
	return rc;
}

int
s3_server_port(const struct s3_server *srv)
{
	return (int)srv->port;
}

int
s3_server_metrics_port(const struct s3_server *srv)
{
	return (int)srv->mport;
}

int
s3_server_run(struct s3_server *srv)
{
	unsigned started = 1;
	int rc = 0;

	for (unsigned i = 1; i < srv->nloops; i++) {
		if (pthread_create(&srv->loops[i].thread, NULL, loop_run, &srv->loops[i]) != 0) {
			rc = -EAGAIN;
			s3_server_stop(srv);
			break;
		}
		pthread_setname_np(srv->loops[i].thread, "s3-loop");
		started++;
	}
	for (unsigned i = 0; i < srv->nworkers && rc == 0; i++) {
		if (pthread_create(&srv->workers[i], NULL, worker_run, srv) != 0) {
			srv->nworkers = i;
			rc = -EAGAIN;
			s3_server_stop(srv);
		} else {
			pthread_setname_np(srv->workers[i], "s3-worker");
		}
	}
	loop_run(&srv->loops[0]);
	for (unsigned i = 1; i < started; i++)
		pthread_join(srv->loops[i].thread, NULL);
	/* wake workers blocked on a client, let them finish, then close what is left */
	for (unsigned i = 0; i < srv->nloops; i++) {
		pthread_mutex_lock(&srv->loops[i].lock);
		for (struct s3_conn *c = srv->loops[i].conns; c; c = c->next)
			shutdown(c->fd, SHUT_RDWR);
		pthread_mutex_unlock(&srv->loops[i].lock);
	}
	pthread_mutex_lock(&srv->qlock);
	srv->stopping = true;
	pthread_cond_broadcast(&srv->qcond);
	pthread_mutex_unlock(&srv->qlock);
	for (unsigned i = 0; i < srv->nworkers; i++)
		pthread_join(srv->workers[i], NULL);
	srv->qhead = srv->qtail = NULL;
	for (unsigned i = 0; i < srv->nloops; i++) {
		while (srv->loops[i].conns) {
			struct s3_conn *c = srv->loops[i].conns;

			pthread_mutex_lock(&c->mu);
			conn_close(c);
		}
	}
	return rc;
}

void
s3_server_stop(struct s3_server *srv)
{
	uint64_t one = 1;
	ssize_t r = write(srv->stopfd, &one, sizeof(one));

	(void)r;
}

void
s3_server_destroy(struct s3_server *srv)
{
	if (!srv)
		return;
	for (unsigned i = 0; i < MAX_LOOPS; i++) {
		if (srv->loops[i].srv && srv->loops[i].epfd > 0)
			close(srv->loops[i].epfd);
		if (srv->loops[i].srv)
			pthread_mutex_destroy(&srv->loops[i].lock);
	}
	if (srv->nloops) {
		pthread_mutex_destroy(&srv->qlock);
		pthread_cond_destroy(&srv->qcond);
	}
	if (srv->lfd >= 0)
		close(srv->lfd);
	if (srv->mfd >= 0)
		close(srv->mfd);
	if (srv->stopfd >= 0)
		close(srv->stopfd);
	SSL_CTX_free(srv->tls);
	free(srv);
}
