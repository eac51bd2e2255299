/*
 * cl_etcd against a real etcd 3.4 started by the test on loopback (tests/lib/etcd_test.h):
 * keys (put/get/range with limit and more, prefix, delete), txn compares that hold and
 * that fail, leases (keepalive past the TTL, revoke, expiry once renewals stop, the lost
 * callback), bad arguments, a fast clear error with etcd down, https with mTLS, and a 3-member
 * cluster that loses one member (calls and keepalives fail over) and then its quorum. Skips (77)
 * without /usr/bin/etcd.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cl_etcd.h"
#include "zc.h"
#include "etcd_test.h"
#include "t_check.h"

#define S(x) x, strlen(x) /* a text key or value and its length */

/* positional initializers keep the requests below short; the rest is zero */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* etcd is up once a put goes through (a fresh cluster first elects a leader). */
/* Put until it succeeds, within a generous minute: a cluster electing a leader (or a
 * client moving to the next member) answers "unavailable" meanwhile, for as long as the
 * machine's load makes the election take. */
static void
put_eventually(struct cl_etcd *c, const char *key, const char *value)
{
	int64_t end = now_ms() + 60000;
	int rc;

	while ((rc = cl_etcd_put(c, key, strlen(key), value, strlen(value), 0, NULL, 1000)) != 0) {
		CHECK(now_ms() < end);
		usleep(100 * 1000);
	}
}

static void
wait_ready(struct cl_etcd *c)
{
	put_eventually(c, "ready", "1");
}

static bool
exists(struct cl_etcd *c, const char *key)
{
	struct cl_etcd_kvs kvs;
	int rc = cl_etcd_get(c, S(key), false, &kvs, 0);

	CHECK(rc == 0 || rc == ZC_E(ZC_NO_KEY));
	cl_etcd_kvs_fini(&kvs);
	return rc == 0;
}

/* ------------------------------------------------------------------ keys */

static void
test_kv(struct cl_etcd *c)
{
	struct cl_etcd_kvs kvs;
	int64_t rev1, rev2, deleted;

	CHECK_EQ(cl_etcd_put(c, S("k"), S("v1"), 0, &rev1, 0), 0);
	CHECK_EQ(cl_etcd_get(c, S("k"), false, &kvs, 0), 0);
	CHECK_EQ(kvs.n, 1);
	CHECK(!strcmp(kvs.kv[0].key, "k") && !strcmp(kvs.kv[0].value, "v1"));
	CHECK_EQ(kvs.kv[0].value_len, 2);
	CHECK_EQ(kvs.kv[0].version, 1);
	CHECK_EQ(kvs.kv[0].create_revision, rev1);
	CHECK_EQ(kvs.kv[0].mod_revision, rev1);
	CHECK_EQ(kvs.kv[0].lease, 0);
	CHECK(kvs.revision >= rev1);
	cl_etcd_kvs_fini(&kvs);

	CHECK_EQ(cl_etcd_put(c, S("k"), S("v2"), 0, &rev2, 0), 0);
	CHECK(rev2 > rev1);
	CHECK_EQ(cl_etcd_get(c, S("k"), true, &kvs, 0), 0); /* serializable */
	CHECK(!strcmp(kvs.kv[0].value, "v2"));
	CHECK_EQ(kvs.kv[0].version, 2);
	CHECK_EQ(kvs.kv[0].create_revision, rev1);
	CHECK_EQ(kvs.kv[0].mod_revision, rev2);
	cl_etcd_kvs_fini(&kvs);

	/* binary keys and an empty value */
	CHECK_EQ(cl_etcd_put(c, "b\0\xff", 3, "", 0, 0, NULL, 0), 0);
	CHECK_EQ(cl_etcd_get(c, "b\0\xff", 3, false, &kvs, 0), 0);
	CHECK_EQ(kvs.kv[0].key_len, 3);
	CHECK(!memcmp(kvs.kv[0].key, "b\0\xff", 3));
	CHECK_EQ(kvs.kv[0].value_len, 0);
	cl_etcd_kvs_fini(&kvs);

	CHECK_EQ(cl_etcd_get(c, S("nosuchkey"), false, &kvs, 0), ZC_E(ZC_NO_KEY));
	CHECK_EQ(kvs.n, 0);
	CHECK(kvs.revision >= rev2);
	cl_etcd_kvs_fini(&kvs);

	CHECK_EQ(cl_etcd_delete(c, &(struct cl_etcd_range){ S("k") }, &deleted, NULL, 0), 0);
	CHECK_EQ(deleted, 1);
	CHECK_EQ(cl_etcd_delete(c, &(struct cl_etcd_range){ S("k") }, &deleted, NULL, 0), 0);
	CHECK_EQ(deleted, 0);
	CHECK(!exists(c, "k"));
}

static void
test_range(struct cl_etcd *c)
{
	struct cl_etcd_range r = { S("p/"), .prefix = true, .limit = 2 };
	struct cl_etcd_kvs kvs;
	char key[8], val[8];
	int64_t deleted;

	for (int i = 1; i <= 5; i++) {
		snprintf(key, sizeof(key), "p/%d", i);
		snprintf(val, sizeof(val), "v%d", i);
		CHECK_EQ(cl_etcd_put(c, S(key), S(val), 0, NULL, 0), 0);
	}
	CHECK_EQ(cl_etcd_put(c, S("p0"), S("outside"), 0, NULL, 0), 0);
	CHECK_EQ(cl_etcd_put(c, S("p."), S("outside"), 0, NULL, 0), 0);

	/* limit: the first two in key order, more, and the count of all */
	CHECK_EQ(cl_etcd_range(c, &r, &kvs, 0), 0);
	CHECK_EQ(kvs.n, 2);
	CHECK(kvs.more);
	CHECK_EQ(kvs.count, 5);
	CHECK(!strcmp(kvs.kv[0].key, "p/1") && !strcmp(kvs.kv[1].key, "p/2"));
	CHECK(!strcmp(kvs.kv[1].value, "v2"));
	cl_etcd_kvs_fini(&kvs);

	/* without a limit: all five, no more; keys only */
	r.limit = 0;
	r.keys_only = true;
	CHECK_EQ(cl_etcd_range(c, &r, &kvs, 0), 0);
	CHECK_EQ(kvs.n, 5);
	CHECK(!kvs.more);
	CHECK(!strcmp(kvs.kv[4].key, "p/5") && kvs.kv[4].value == NULL);
	cl_etcd_kvs_fini(&kvs);

	/* [p/2, p/4), serializable */
	r = (struct cl_etcd_range){ S("p/2"), S("p/4"), .serializable = true };
	CHECK_EQ(cl_etcd_range(c, &r, &kvs, 0), 0);
	CHECK_EQ(kvs.n, 2);
	CHECK(!strcmp(kvs.kv[0].key, "p/2") && !strcmp(kvs.kv[1].key, "p/3"));
	cl_etcd_kvs_fini(&kvs);

	/* a prefix ending in 0xff: its end is computed past the 0xff */
	CHECK_EQ(cl_etcd_put(c,
	                     "x\xff"
	                     "1",
	                     3, S("a"), 0, NULL, 0),
	         0);
	CHECK_EQ(cl_etcd_put(c, S("y"), S("b"), 0, NULL, 0), 0);
	r = (struct cl_etcd_range){ "x\xff", 2, .prefix = true };
	CHECK_EQ(cl_etcd_range(c, &r, &kvs, 0), 0);
	CHECK_EQ(kvs.n, 1);
	CHECK_EQ(kvs.kv[0].key_len, 3);
	cl_etcd_kvs_fini(&kvs);

	/* delete by prefix leaves the neighbours */
	r = (struct cl_etcd_range){ S("p/"), .prefix = true };
	CHECK_EQ(cl_etcd_delete(c, &r, &deleted, NULL, 0), 0);
	CHECK_EQ(deleted, 5);
	CHECK_EQ(cl_etcd_range(c, &r, &kvs, 0), 0);
	CHECK_EQ(kvs.n, 0);
	CHECK(kvs.kv == NULL);
	cl_etcd_kvs_fini(&kvs);
	CHECK(exists(c, "p0") && exists(c, "p."));

	/* the empty prefix: every key */
	r = (struct cl_etcd_range){ .prefix = true };
	CHECK_EQ(cl_etcd_range(c, &r, &kvs, 0), 0);
	CHECK(kvs.n >= 4);
	cl_etcd_kvs_fini(&kvs);
}

/* ------------------------------------------------------------------ txn */

static void
test_txn(struct cl_etcd *c)
{
	/* create if absent, else read what is there */
	struct cl_etcd_cmp absent = { S("t/a"), CL_ETCD_CMP_VERSION, CL_ETCD_EQUAL, 0 };
	struct cl_etcd_op put = { CL_ETCD_OP_PUT, { S("t/a") }, S("one") };
	struct cl_etcd_op get = { CL_ETCD_OP_RANGE, { S("t/a") } };
	struct cl_etcd_txn txn = { &absent, 1, &put, 1, &get, 1 };
	struct cl_etcd_txn_result res;
	int64_t created;

	CHECK_EQ(cl_etcd_txn(c, &txn, &res, 0), 0);
	CHECK(res.succeeded);
	CHECK_EQ(res.n_op, 1);
	CHECK_EQ(res.op[0].type, CL_ETCD_OP_PUT);
	created = res.revision;
	cl_etcd_txn_result_fini(&res);

	CHECK_EQ(cl_etcd_txn(c, &txn, &res, 0), 0);
	CHECK(!res.succeeded);
	CHECK_EQ(res.n_op, 1);
	CHECK_EQ(res.op[0].type, CL_ETCD_OP_RANGE);
	CHECK_EQ(res.op[0].kvs.n, 1);
	CHECK(!strcmp(res.op[0].kvs.kv[0].value, "one"));
	CHECK_EQ(res.op[0].kvs.kv[0].mod_revision, created);
	CHECK_EQ(res.revision, created); /* a txn that writes nothing leaves the revision */
	cl_etcd_txn_result_fini(&res);

	/* fenced update: mod_revision must still be the one read */
	struct cl_etcd_cmp fence = { S("t/a"), CL_ETCD_CMP_MOD, CL_ETCD_EQUAL, created };
	struct cl_etcd_op upd[2] = {
		{ CL_ETCD_OP_PUT, { S("t/a") }, S("two") },
		{ CL_ETCD_OP_PUT, { S("t/b") }, S("side") },
	};
	txn = (struct cl_etcd_txn){ &fence, 1, upd, 2, NULL, 0 };
	CHECK_EQ(cl_etcd_txn(c, &txn, &res, 0), 0);
	CHECK(res.succeeded);
	CHECK_EQ(res.n_op, 2);
	CHECK(res.revision > created);
	cl_etcd_txn_result_fini(&res);
	/* the same fence again is stale now: nothing runs (no else branch) */
	CHECK_EQ(cl_etcd_txn(c, &txn, &res, 0), 0);
	CHECK(!res.succeeded);
	CHECK_EQ(res.n_op, 0);
	cl_etcd_txn_result_fini(&res);

	/* several compares: value, create revision, version; all must hold */
	struct cl_etcd_cmp all[3] = {
		{ S("t/a"), CL_ETCD_CMP_VALUE, CL_ETCD_EQUAL, 0, S("two") },
		{ S("t/a"), CL_ETCD_CMP_CREATE, CL_ETCD_EQUAL, created },
		{ S("t/a"), CL_ETCD_CMP_VERSION, CL_ETCD_GREATER, 1 },
	};
	struct cl_etcd_op del = { CL_ETCD_OP_DELETE, { S("t/"), .prefix = true } };
	txn = (struct cl_etcd_txn){ all, 3, &del, 1, NULL, 0 };
	CHECK_EQ(cl_etcd_txn(c, &txn, &res, 0), 0);
	CHECK(res.succeeded);
	CHECK_EQ(res.op[0].type, CL_ETCD_OP_DELETE);
	CHECK_EQ(res.op[0].deleted, 2);
	cl_etcd_txn_result_fini(&res);
	all[0].op = CL_ETCD_NOT_EQUAL; /* t/a is gone: its value is no value */
	CHECK_EQ(cl_etcd_txn(c, &txn, NULL, 0), 0);

	/* etcd refuses two writes to one key in a branch */
	struct cl_etcd_op twice[2] = {
		{ CL_ETCD_OP_PUT, { S("t/c") }, S("1") },
		{ CL_ETCD_OP_PUT, { S("t/c") }, S("2") },
	};
	txn = (struct cl_etcd_txn){ NULL, 0, twice, 2, NULL, 0 };
	CHECK_EQ(cl_etcd_txn(c, &txn, &res, 0), -EINVAL);
	CHECK_EQ(res.n_op, 0);
	cl_etcd_txn_result_fini(&res);
	CHECK(!exists(c, "t/c"));
}

/* ------------------------------------------------------------------ leases */

struct lost {
	atomic_int calls;
	atomic_int err;
	atomic_llong id;
};

static void
on_lost(void *arg, int64_t id, int err)
{
	struct lost *l = arg;

	l->id = id;
	l->err = err;
	l->calls++;
}

/* Wait until key is gone; how long that took, or -1 after limit_ms. */
static int64_t
wait_gone(struct cl_etcd *c, const char *key, int64_t limit_ms)
{
	int64_t t0 = now_ms();

	while (exists(c, key)) {
		if (now_ms() - t0 > limit_ms)
			return -1;
		usleep(100 * 1000);
	}
	return now_ms() - t0;
}

static void
test_lease(struct cl_etcd *c)
{
	struct cl_etcd_keepalive *ka;
	struct lost lost = { 0 };
	struct cl_etcd_kvs kvs;
	int64_t id, ttl, t0;

	CHECK_EQ(cl_etcd_lease_grant(c, 2, &id, &ttl, 0), 0);
	CHECK(id > 0);
	CHECK_EQ(ttl, 2);
	CHECK_EQ(cl_etcd_put(c, S("l/alive"), S("x"), id, NULL, 0), 0);
	CHECK_EQ(cl_etcd_get(c, S("l/alive"), false, &kvs, 0), 0);
	CHECK_EQ(kvs.kv[0].lease, id);
	cl_etcd_kvs_fini(&kvs);

	/* kept alive well past its TTL */
	CHECK_EQ(cl_etcd_keepalive_start(c, id, ttl, on_lost, &lost, &ka), 0);
	sleep(4);
	CHECK(exists(c, "l/alive"));
	CHECK_EQ(lost.calls, 0);
	/* renewals stop: the lease expires within its TTL (plus etcd's 0.5 s sweep) */
	cl_etcd_keepalive_stop(ka);
	t0 = wait_gone(c, "l/alive", 30000); /* generous: etcd under load */
	CHECK(t0 >= 0);
	fprintf(stderr, "lease expired %lld ms after the last renewal stopped\n", (long long)t0);
	CHECK_EQ(lost.calls, 0);

	/* a keepalive on a lease that is gone reports it at its first renewal */
	CHECK_EQ(cl_etcd_keepalive_start(c, id, 3, on_lost, &lost, &ka), 0);
	t0 = now_ms();
	while (!lost.calls && now_ms() - t0 < 30000)
		usleep(50 * 1000);
	CHECK_EQ(lost.calls, 1);
	CHECK_EQ(lost.err, ZC_E(ZC_NO_KEY));
	CHECK_EQ(lost.id, id);
	cl_etcd_keepalive_stop(ka);

	/* revoke deletes the lease's keys at once */
	CHECK_EQ(cl_etcd_lease_grant(c, 60, &id, NULL, 0), 0);
	CHECK_EQ(cl_etcd_put(c, S("l/r1"), S("x"), id, NULL, 0), 0);
	CHECK_EQ(cl_etcd_put(c, S("l/r2"), S("x"), id, NULL, 0), 0);
	CHECK_EQ(cl_etcd_lease_revoke(c, id, 0), 0);
	CHECK(!exists(c, "l/r1") && !exists(c, "l/r2"));
	CHECK_EQ(cl_etcd_lease_revoke(c, id, 0), ZC_E(ZC_NO_KEY));
	/* a put onto a lease that is gone is refused */
	CHECK_EQ(cl_etcd_put(c, S("l/r3"), S("x"), id, NULL, 0), ZC_E(ZC_NO_KEY));
}

/* ------------------------------------------------------------------ errors */

static void
test_bad_args(struct cl_etcd *c)
{
	static const char *const bad[] = {
		"",
		",",
		"127.0.0.1",
		"127.0.0.1:",
		":2379",
		"127.0.0.1:x",
		"http://127.0.0.1:1,https://127.0.0.1:2",
		"127.0.0.1:1/path",
		"127.0.0.1:1,",
		"1:1,1:2,1:3,1:4,1:5,1:6,1:7,1:8,1:9,1:10,1:11,1:12,1:13,1:14,1:15,1:16,1:17",
	};
	struct cl_etcd_opts tls = { .ca_file = "/nonexistent/ca.pem" };
	struct cl_etcd_range r = { NULL, 0 };
	struct cl_etcd_kvs kvs;
	struct cl_etcd *x;
	int64_t id;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_EQ(cl_etcd_create(bad[i], NULL, &x), -EINVAL);
		CHECK(x == NULL);
	}
	CHECK_EQ(cl_etcd_create("https://127.0.0.1:1", &tls, &x), -EINVAL);
	tls = (struct cl_etcd_opts){ .cert_file = "/etc/hostname" }; /* a cert without a key */
	CHECK_EQ(cl_etcd_create("https://127.0.0.1:1", &tls, &x), -EINVAL);
	CHECK_EQ(cl_etcd_create("http://127.0.0.1:1,127.0.0.1:2", NULL, &x), 0);
	cl_etcd_destroy(x);
	cl_etcd_destroy(NULL);

	CHECK_EQ(cl_etcd_put(c, "", 0, S("v"), 0, NULL, 0), -EINVAL);
	CHECK_EQ(cl_etcd_get(c, "", 0, false, &kvs, 0), -EINVAL);
	CHECK_EQ(cl_etcd_range(c, &r, &kvs, 0), -EINVAL); /* empty key, no prefix */
	r = (struct cl_etcd_range){ S("a"), .limit = 1 };
	CHECK_EQ(cl_etcd_delete(c, &r, NULL, NULL, 0), -EINVAL);
	r.limit = -1;
	CHECK_EQ(cl_etcd_range(c, &r, &kvs, 0), -EINVAL);
	CHECK_EQ(cl_etcd_lease_grant(c, 0, &id, NULL, 0), -EINVAL);
	CHECK_EQ(cl_etcd_lease_revoke(c, 0, 0), -EINVAL);
	/* a revision that does not exist yet */
	r = (struct cl_etcd_range){ S("a"), .revision = 1000000000 };
	CHECK_EQ(cl_etcd_range(c, &r, &kvs, 0), -ERANGE);
}

/* Nothing listens: every call fails with the 503 code soon, not at its deadline. */
static void
test_down(void)
{
	struct cl_etcd_opts o = { .timeout_ms = 3600000 };
	struct cl_etcd *c;
	struct cl_etcd_kvs kvs;
	char eps[64];
	int ports[2];
	int64_t id;

	t_free_ports(ports, 2);
	snprintf(eps, sizeof(eps), "127.0.0.1:%d,127.0.0.1:%d", ports[0], ports[1]);
	CHECK_EQ(cl_etcd_create(eps, &o, &c), 0);
	/* each ends after the reconnect window (~1.2 s), not at its deadline: that is far past
	 * this test's own timeout, so only the refusals can end these calls */
	CHECK_EQ(cl_etcd_put(c, S("k"), S("v"), 0, NULL, 0), ZC_E(ZC_NO_QUORUM));
	CHECK_EQ(cl_etcd_get(c, S("k"), true, &kvs, 0), ZC_E(ZC_NO_QUORUM));
	CHECK_EQ(cl_etcd_lease_grant(c, 5, &id, NULL, 0), ZC_E(ZC_NO_QUORUM));
	CHECK_EQ(zc_err_code(ZC_E(ZC_NO_QUORUM)), ZC_NO_QUORUM);
	cl_etcd_kvs_fini(&kvs);
	cl_etcd_destroy(c);
}

/* ------------------------------------------------------------------ TLS */

/* etcd serving https with client-certificate auth: mTLS works; without a client
 * certificate, with an unknown CA or over plain http nothing gets through. */
static void
test_tls(void)
{
	char dir[] = "/tmp/zest-etcd-tls-XXXXXX", ca[64], cert[64], key[64], eps[300];
	struct cl_etcd_opts o = {
		.timeout_ms = 2000, .ca_file = ca, .cert_file = cert, .key_file = key
	};
	struct cl_etcd_kvs kvs;
	struct cl_etcd *c;
	struct t_etcd e;

	CHECK(mkdtemp(dir));
	if (!t_tls_make(dir)) {
		printf("test_tls skipped: openssl failed or missing (see %s/openssl.log)\n", dir);
		nftw(dir, t_etcd_rm, 16, FTW_DEPTH | FTW_PHYS);
		return;
	}
	snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
	snprintf(cert, sizeof(cert), "%s/client.pem", dir);
	snprintf(key, sizeof(key), "%s/client.key", dir);
	t_etcd_start_tls(&e, 1, dir);
	snprintf(eps, sizeof(eps), "https://%s", e.endpoints);
	CHECK_EQ(cl_etcd_create(eps, &o, &c), 0);
	wait_ready(c);
	CHECK_EQ(cl_etcd_put(c, S("tls/k"), S("v"), 0, NULL, 0), 0);
	CHECK_EQ(cl_etcd_get(c, S("tls/k"), false, &kvs, 0), 0);
	CHECK(!strcmp(kvs.kv[0].value, "v"));
	cl_etcd_kvs_fini(&kvs);
	cl_etcd_destroy(c);

	o.cert_file = o.key_file = NULL; /* no client certificate */
	CHECK_EQ(cl_etcd_create(eps, &o, &c), 0);
	CHECK(cl_etcd_put(c, S("tls/k"), S("v"), 0, NULL, 0) < 0);
	cl_etcd_destroy(c);
	o.ca_file = cert; /* a CA that did not sign the server */
	o.cert_file = cert;
	o.key_file = key;
	CHECK_EQ(cl_etcd_create(eps, &o, &c), 0);
	CHECK(cl_etcd_put(c, S("tls/k"), S("v"), 0, NULL, 0) < 0);
	cl_etcd_destroy(c);
	CHECK_EQ(cl_etcd_create(e.endpoints, NULL, &c), 0); /* plain http to https */
	CHECK(cl_etcd_put(c, S("tls/k"), S("v"), 0, NULL, 1000) < 0);
	cl_etcd_destroy(c);

	t_etcd_stop(&e);
	nftw(dir, t_etcd_rm, 16, FTW_DEPTH | FTW_PHYS);
}

/* ------------------------------------------------------------------ cluster */

static void
test_cluster(void)
{
	struct cl_etcd_opts o = { .timeout_ms = 3000 };
	struct cl_etcd_keepalive *ka;
	struct lost lost = { 0 };
	struct cl_etcd_kvs kvs;
	struct cl_etcd *c;
	struct t_etcd e;
	int64_t id, ttl, t0;
	int rc;

	t_etcd_start(&e, 3);
	CHECK_EQ(cl_etcd_create(e.endpoints, &o, &c), 0);
	wait_ready(c);
	CHECK_EQ(cl_etcd_put(c, S("c/k"), S("v1"), 0, NULL, 0), 0);
	CHECK_EQ(cl_etcd_lease_grant(c, 5, &id, &ttl, 0), 0);
	CHECK_EQ(cl_etcd_put(c, S("c/leased"), S("x"), id, NULL, 0), 0);
	CHECK_EQ(cl_etcd_keepalive_start(c, id, ttl, on_lost, &lost, &ka), 0);

	/* the member the client talks to (the first) dies: the client moves on to the others
	 * (once they have a leader, however long the election takes under load) */
	t_etcd_kill(&e, 0);
	t0 = now_ms();
	put_eventually(c, "c/k", "v2");
	fprintf(stderr, "put after losing a member took %lld ms\n", (long long)(now_ms() - t0));
	CHECK_EQ(cl_etcd_get(c, S("c/k"), false, &kvs, 0), 0);
	CHECK(!strcmp(kvs.kv[0].value, "v2"));
	cl_etcd_kvs_fini(&kvs);
	/* the keepalive failed over too: the key outlives its TTL */
	sleep(6);
	CHECK(exists(c, "c/leased"));
	CHECK_EQ(lost.calls, 0);
	cl_etcd_keepalive_stop(ka);

	/* a second member dies: no quorum. Writes and linearizable reads fail within the
	 * deadline with a 503 code; the survivor still serves serializable reads. */
	t_etcd_kill(&e, 1);
	t0 = now_ms();
	rc = cl_etcd_put(c, S("c/k"), S("v3"), 0, NULL, 1500);
	fprintf(stderr, "put without quorum answered in %lld ms (deadline 1500)\n",
	        (long long)(now_ms() - t0));
	if (rc != -ETIMEDOUT && rc != ZC_E(ZC_NO_QUORUM))
		fprintf(stderr, "put without quorum: rc=%d (%s)\n", rc,
		        rc > -ZC_ERR_BASE ? strerror(-rc) : zc_code_word(zc_err_code(rc)));
	CHECK(rc == -ETIMEDOUT || rc == ZC_E(ZC_NO_QUORUM));
	CHECK_EQ(zc_err_code(rc) == ZC_UNAVAILABLE || zc_err_code(rc) == ZC_NO_QUORUM, 1);
	rc = cl_etcd_get(c, S("c/k"), false, &kvs, 1500);
	if (rc != -ETIMEDOUT && rc != ZC_E(ZC_NO_QUORUM))
		fprintf(stderr, "linearizable get without quorum: rc=%d\n", rc);
	CHECK(rc == -ETIMEDOUT || rc == ZC_E(ZC_NO_QUORUM));
	cl_etcd_kvs_fini(&kvs);
	CHECK_EQ(cl_etcd_get(c, S("c/k"), true, &kvs, 1500), 0);
	CHECK(!strcmp(kvs.kv[0].value, "v2"));
	cl_etcd_kvs_fini(&kvs);

	cl_etcd_destroy(c);
	t_etcd_stop(&e);
}

int
main(void)
{
	struct cl_etcd *c;
	struct t_etcd e;

	zc_log_init();
	if (!t_etcd_available()) {
		printf("SKIP: %s not found (Debian package etcd-server)\n", t_etcd_bin());
		return 77;
	}
	test_down();
	t_etcd_start(&e, 1);
	CHECK_EQ(cl_etcd_create(e.endpoints, NULL, &c), 0);
	wait_ready(c);
	test_kv(c);
	test_range(c);
	test_txn(c);
	test_bad_args(c);
	test_lease(c);
	cl_etcd_destroy(c);
	t_etcd_stop(&e);
	test_tls();
	test_cluster();
	printf("ok\n");
	return 0;
}
