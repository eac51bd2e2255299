/*
 * s3_conn_io: a connection's socket and TLS reads and writes, and the answers the
 * operations give (s3_resp_*): heads, bodies, XML, errors, parked when the socket is full.
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

#include "zc.h"
#include "zc_net.h"
#include "s3_server_internal.h"

/* ------------------------------------------------------------------ socket I/O */

long
s3_conn_read(struct s3_conn *c, void *buf, size_t n)
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

int
s3_conn_write(struct s3_conn *c, const void *p, size_t n, bool more)
{
	const uint8_t *b = p;

	if (c->obuf) { /* what was deferred goes first */
		char *o = c->obuf;
		size_t at = c->odone, len = c->olen;
		int rc;

		c->obuf = NULL;
		c->olen = c->odone = 0;
		rc = s3_conn_write(c, o + at, len - at, more || n > 0);
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
long
s3_conn_write_nb(struct s3_conn *c, const void *p, size_t n, bool more)
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
		return s3_conn_write(c, b->p, b->len, more);
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
		w = s3_conn_write_nb(c, b->p, b->len, more);
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
	rc = s3_conn_write(rq->conn, p, n, false);
	if (rc)
		rq->close = true;
	else
		atomic_fetch_add_explicit(&s3_metrics.bytes_out, n, memory_order_relaxed);
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
