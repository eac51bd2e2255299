/*
 * s3_conn: one connection's request state machine: the head, the body (sized,
 * chunked, aws-chunked), the answer, parking on a full socket, keep-alive.
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
void
s3_conn_unlink(struct s3_conn *c)
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
void
s3_conn_destroy(struct s3_conn *c)
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
	atomic_fetch_sub(&s3_metrics.conns, 1);
	pthread_mutex_unlock(&c->mu);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

/* Close and free c; the caller holds c->mu (released here). */
void
s3_conn_close(struct s3_conn *c)
{
	struct loop *l = c->loop;

	pthread_mutex_lock(&l->lock);
	s3_conn_unlink(c);
	pthread_mutex_unlock(&l->lock);
	s3_conn_destroy(c);
}

static void
request_done(struct s3_conn *c)
{
	struct s3_req *rq = &c->rq;

	s3_metric_request(rq->op, rq->status, zc_now_ns() - rq->start_ns);
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
			long w = s3_conn_write_nb(c, c->obuf + c->odone, c->olen - c->odone,
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
			long w = s3_conn_write_nb(c, (const uint8_t *)c->gseg.ptr + c->gdone,
			                          c->gseg.len - c->gdone, false);

			if (w == -EAGAIN)
				return true;
			if (w < 0) {
				rq->close = true;
				break;
			}
			c->gdone += (size_t)w;
			c->last_ns = zc_now_ns(); /* progress, however slow, is not idleness */
			atomic_fetch_add_explicit(&s3_metrics.bytes_out, (unsigned long)w,
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
	atomic_fetch_add_explicit(&s3_metrics.bytes_in, n, memory_order_relaxed);
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

void
s3_conn_send_error(struct s3_conn *c, enum s3_err err)
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
		s3_metrics_render(&b);
		s3_metrics_render_md5(&b, c->loop->srv->md5mb);
		if (c->loop->srv->be->metrics)
			c->loop->srv->be->metrics(c->loop->srv->be->ctx, &b);
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

	if (s3_conn_write(c, cont, sizeof(cont) - 1, false) != 0)
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
	rq->md5mb = srv->md5mb;
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
	s3_rq_enter(rq->start_ns);
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
		int rc;

		s3_rq_enter(rq->start_ns);
		rc = s3_ops_end(rq);

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
	s3_rq_enter(rq->start_ns);
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
				s3_conn_send_error(c, rc == -EMSGSIZE  ? S3E_HEADER_TOO_LARGE
				                      : rc == -ENOTSUP ? S3E_HTTP_VERSION
				                                       : S3E_BAD_REQUEST);
				return;
			}
			/* the head must outlive buffer compaction: the request keeps its own copy
			 * (framing, not payload) */
			rq->head_copy = malloc(rq->http.head_len);
			if (!rq->head_copy) {
				s3_conn_send_error(c, S3E_INTERNAL);
				return;
			}
			memcpy(rq->head_copy, c->rb->data + c->rstart, rq->http.head_len);
			c->rstart += rq->http.head_len;
			rc = s3_http_parse(&rq->http, rq->head_copy, rq->http.head_len,
			                   cfg->max_header);
			if (rc < 0) {
				free(rq->head_copy);
				rq->head_copy = NULL;
				s3_conn_send_error(c, S3E_INTERNAL);
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
				s3_conn_send_error(c, S3E_HEADER_TOO_LARGE);
				break;
			}
		}
		n = s3_conn_read(c, c->rb->data + c->rend, c->rb->cap - c->rend);
		if (n == -EAGAIN)
			break;
		if (n <= 0) {
			if (c->in_request && c->state == C_BODY) {
				c->rq.close = true;
				/* S3E_INCOMPLETE_BODY's own message speaks of Content-Length */
				s3_ops_abort(&c->rq, c->chunked ? S3_OK : S3E_INCOMPLETE_BODY);
				if (c->chunked && !c->rq.head_sent)
					s3_resp_error(&c->rq, S3E_INCOMPLETE_BODY,
					              body_msg(-EINVAL));
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
		s3_conn_close(c);
		return true;
	}
	if (c->rb && !c->in_request && c->rstart == c->rend && atomic_load(&c->rb->ref.refs) == 1) {
		zc_ref_put(&c->rb->ref);
		c->rb = NULL;
		c->rstart = c->rend = 0;
	}
	return false;
}

/* Serve a connection the loop handed over: a parked GET body first, then whatever was
 * read or is readable. Returns true when c was closed (and freed). */
bool
s3_conn_serve(struct s3_conn *c)
{
	if (c->state == C_SEND) {
		if (send_step(c))
			return false;
		if (!c->closing)
			process(c); /* requests read before this answer ended (pipelining) */
		if (c->closing) {
			s3_conn_close(c);
			return true;
		}
		if (c->state == C_SEND)
			return false;
	}
	return on_readable(c);
}

/* Re-arm c (one-shot): a parked GET waits to write, or under TLS maybe to read (not both:
 * a writable socket would wake a TLS write that is waiting for input again and again). */
void
s3_conn_arm(struct s3_conn *c)
{
	struct epoll_event ev = { .events = CONN_EVENTS, .data.ptr = c };

	if (c->state == C_SEND)
		ev.events = (c->want_in ? EPOLLIN : EPOLLOUT) | EPOLLONESHOT;
	epoll_ctl(c->loop->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}
