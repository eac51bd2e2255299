/*
 * s3_server: the HTTP/1.1 front of the gateway: worker threads, accept, timeouts, the
 * event loops, setup and teardown (s3_server_internal.h says which file holds what; the
 * design is described there).
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
		if (!s3_conn_serve(c)) {
			s3_conn_arm(c);
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
		if (atomic_load(&s3_metrics.conns) >= (long)srv->cfg.max_conns) {
			static atomic_ulong last_warn_s;
			unsigned long now_s = (unsigned long)(zc_now_ns() / 1000000000u);

			if (atomic_exchange(&last_warn_s, now_s) !=
			    now_s) /* once a second at most */
				ZC_WARN("s3", "conns=%ld limit=%u action=refuse",
				        atomic_load(&s3_metrics.conns), srv->cfg.max_conns);
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
		atomic_fetch_add(&s3_metrics.conns, 1);
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
			s3_conn_send_error(c, S3E_REQUEST_TIMEOUT);
			s3_conn_unlink(c);
			s3_conn_destroy(c);
		} else if (elapsed_over(now, c->last_ns, cfg->idle_timeout_ms)) {
			if (c->in_request && c->state == C_BODY) {
				c->rq.close = true;
				s3_ops_abort(&c->rq, S3E_REQUEST_TIMEOUT);
				s3_req_fini(&c->rq);
				c->in_request = false;
			}
			s3_conn_unlink(c);
			s3_conn_destroy(c);
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
		if (!zc_err_is(rc, ZC_SLOW_DOWN) || tries >= 5)
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
	if (srv->cfg.md5 != S3_MD5_SERIAL) {
		rc = s3_md5mb_create(NULL, &srv->md5mb);
		if (rc == -ENOTSUP && srv->cfg.md5 == S3_MD5_AUTO) {
			rc = 0;
		} else if (rc < 0) {
			ZC_ERR("s3", "md5=multi err=%d%s", rc,
			       rc == -ENOTSUP ? " reason=no_avx2" : "");
			goto fail;
		}
	}
	ZC_INFO("s3", "md5=%s", srv->md5mb ? "multi" : "serial");
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
			s3_conn_close(c);
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
	s3_md5mb_destroy(srv->md5mb);
	free(srv);
}
