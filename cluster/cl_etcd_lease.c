/*
 * cl_etcd: leases. Grant and revoke are plain calls; a keepalive is a thread of its own
 * that renews one lease every TTL/3 and says when the lease is lost.
 *
 * Each renewal is a LeaseKeepAlive stream carrying one request (cl_etcd_call): etcd answers
 * every request it reads, so this costs an HTTP/2 stream per renewal (a few a second at
 * most) and buys each renewal its own deadline and the same failover as every other call,
 * with no long-lived stream to watch and reopen.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "cl_etcd_internal.h"
#include "zc.h"

int
cl_etcd_lease_grant(struct cl_etcd *c, int64_t ttl_s, int64_t *id, int64_t *granted_ttl_s,
                    unsigned timeout_ms)
{
	Etcdserverpb__LeaseGrantRequest req = ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;
	Etcdserverpb__LeaseGrantResponse *resp;
	int rc;

	if (ttl_s <= 0 || !id)
		return -EINVAL;
	req.ttl = ttl_s;
	rc = cl_etcd_call(c, ETCD_LEASE_GRANT, &req.base,
	                  &etcdserverpb__lease_grant_response__descriptor,
	                  (ProtobufCMessage **)&resp, timeout_ms);
	if (rc)
		return rc;
	/* etcd 3.4 reports refusals as a gRPC status; `error` is a leftover it leaves empty */
	if (resp->error && resp->error[0]) {
		ZC_WARN("etcd", "lease grant refused: %s", resp->error);
		rc = -EIO;
	} else {
		*id = resp->id;
		if (granted_ttl_s)
			*granted_ttl_s = resp->ttl;
	}
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return rc;
}

int
cl_etcd_lease_shared(struct cl_etcd *c, int64_t ttl_s, int64_t renew_s, int64_t *id,
                     unsigned timeout_ms)
{
	uint64_t now = zc_now_ns();
	int rc = 0;

	if (renew_s <= 0 || renew_s >= ttl_s || !id)
		return -EINVAL;
	/* one grant at a time: callers meanwhile wait for it rather than grant their own */
	pthread_mutex_lock(&c->lease_mu);
	if (!c->shared_lease || now - c->shared_at_ns > (uint64_t)renew_s * 1000000000u) {
		int64_t fresh;

		rc = cl_etcd_lease_grant(c, ttl_s, &fresh, NULL, timeout_ms);
		if (!rc) {
			c->shared_lease = fresh;
			c->shared_at_ns = now;
		}
	}
	*id = c->shared_lease;
	if (*id)
		rc = 0; /* a grant that failed leaves the last lease, which still has time left */
	pthread_mutex_unlock(&c->lease_mu);
	return rc;
}

int
cl_etcd_lease_revoke(struct cl_etcd *c, int64_t id, unsigned timeout_ms)
{
	Etcdserverpb__LeaseRevokeRequest req = ETCDSERVERPB__LEASE_REVOKE_REQUEST__INIT;
	ProtobufCMessage *resp;
	int rc;

	if (id <= 0)
		return -EINVAL;
	req.id = id;
	rc = cl_etcd_call(c, ETCD_LEASE_REVOKE, &req.base,
	                  &etcdserverpb__lease_revoke_response__descriptor, &resp, timeout_ms);
	if (!rc)
		protobuf_c_message_free_unpacked(resp, NULL);
	return rc;
}

/* ------------------------------------------------------------------ keepalive */

#define RETRY_MS 500 /* between renewals while they fail */

struct cl_etcd_keepalive {
	struct cl_etcd *c;
	int64_t id;
	int64_t ttl_ms;
	cl_etcd_lease_lost_cb lost_cb;
	void *arg;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cond; /* CLOCK_MONOTONIC */
	bool stop;
};

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One renewal: 0 and *ttl_s, or an error (ZC_E(ZC_NO_KEY): etcd no longer knows the lease). */
static int
renew(struct cl_etcd_keepalive *ka, unsigned timeout_ms, int64_t *ttl_s)
{
	Etcdserverpb__LeaseKeepAliveRequest req = ETCDSERVERPB__LEASE_KEEP_ALIVE_REQUEST__INIT;
	Etcdserverpb__LeaseKeepAliveResponse *resp;
	int rc;

	req.id = ka->id;
	rc = cl_etcd_call(ka->c, ETCD_LEASE_KEEPALIVE, &req.base,
	                  &etcdserverpb__lease_keep_alive_response__descriptor,
	                  (ProtobufCMessage **)&resp, timeout_ms);
	if (rc)
		return rc;
	*ttl_s = resp->ttl;
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	/* an expired or revoked lease is answered with TTL <= 0, not an error status */
	return *ttl_s > 0 ? 0 : ZC_E(ZC_NO_KEY);
}

/* Sleep until `until` (monotonic ms) or stop; true if stopped. */
static bool
nap(struct cl_etcd_keepalive *ka, int64_t until)
{
	struct timespec ts = { until / 1000, (until % 1000) * 1000000 };
	bool stop;

	pthread_mutex_lock(&ka->mu);
	while (!ka->stop && now_ms() < until)
		pthread_cond_timedwait(&ka->cond, &ka->mu, &ts);
	stop = ka->stop;
	pthread_mutex_unlock(&ka->mu);
	return stop;
}

static void *
keepalive_thread(void *arg)
{
	struct cl_etcd_keepalive *ka = arg;
	int64_t last_ok = now_ms(), next = last_ok + ka->ttl_ms / 3;

	while (!nap(ka, next)) {
		int64_t t = now_ms(), left = last_ok + ka->ttl_ms - t, ttl_s;
		/* a renewal that cannot finish before the lease would expire is useless */
		unsigned timeout = left < 1000 ? 1000 : left > 5000 ? 5000 : (unsigned)left;
		int rc = renew(ka, timeout, &ttl_s);

		t = now_ms();
		if (!rc) {
			last_ok = t;
			ka->ttl_ms = ttl_s * 1000;
			next = t + ka->ttl_ms / 3;
			continue;
		}
		if (zc_err_is(rc, ZC_NO_KEY) || t - last_ok >= ka->ttl_ms) {
			ZC_WARN("etcd", "lease=%llx lost err=%d", (unsigned long long)ka->id, rc);
			ka->lost_cb(ka->arg, ka->id, rc);
			break;
		}
		next = t + RETRY_MS;
	}
	return NULL;
}

int
cl_etcd_keepalive_start(struct cl_etcd *c, int64_t id, int64_t ttl_s, cl_etcd_lease_lost_cb lost_cb,
                        void *arg, struct cl_etcd_keepalive **out)
{
	struct cl_etcd_keepalive *ka;
	pthread_condattr_t ca;
	int rc;

	*out = NULL;
	if (!c || id <= 0 || ttl_s <= 0 || !lost_cb)
		return -EINVAL;
	ka = calloc(1, sizeof(*ka));
	if (!ka)
		return -ENOMEM;
	ka->c = c;
	ka->id = id;
	ka->ttl_ms = ttl_s * 1000;
	ka->lost_cb = lost_cb;
	ka->arg = arg;
	pthread_mutex_init(&ka->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&ka->cond, &ca);
	pthread_condattr_destroy(&ca);
	rc = pthread_create(&ka->thread, NULL, keepalive_thread, ka);
	if (rc) {
		pthread_cond_destroy(&ka->cond);
		pthread_mutex_destroy(&ka->mu);
		free(ka);
		return -EAGAIN;
	}
	pthread_setname_np(ka->thread, "etcd-keepalive");
	*out = ka;
	return 0;
}

void
cl_etcd_keepalive_stop(struct cl_etcd_keepalive *ka)
{
	if (!ka)
		return;
	pthread_mutex_lock(&ka->mu);
	ka->stop = true;
	pthread_cond_broadcast(&ka->cond);
	pthread_mutex_unlock(&ka->mu);
	/* a renewal in flight finishes within its deadline (at most 5 s) */
	pthread_join(ka->thread, NULL);
	pthread_cond_destroy(&ka->cond);
	pthread_mutex_destroy(&ka->mu);
	free(ka);
}
