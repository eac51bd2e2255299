/*
 * Shared by test_dn_cheal.c and test_dn_cheal_spread.c: an in-process datanode (a cell
 * store over temp folders, the gRPC binding, a loopback rpc server, plaintext) registered
 * in etcd by hand, cells written into and read back from a store, a healer's metric, a
 * record's cell holders, to-do keys and a pass over every healer.
 * Include after dn_test.h and cmeta_test.h.
 */
#ifndef ZEST_TEST_CHEAL_H
#define ZEST_TEST_CHEAL_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpc_server.h"
#include "dn_rpc.h"
#include "dn_cheal.h"
#include "cl_members.h"

struct tnode {
	struct t_env t;
	struct dn_rpc *b;
	struct rpc_server *srv;
	char name[16], addr[64];
	struct dn_cheal *h;
};

static inline void
tn_up(struct tnode *n, unsigned i)
{
	struct dn_rpc_opts bo = { .write_workers = 2, .readers = 2 };
	struct rpc_server_opts so = { .listen = "127.0.0.1:0",
		                      .cq_threads = 1,
		                      .marshaller = RPC_MARSHAL_ZEROCOPY,
		                      .tls.insecure = true };
	struct rpc_server_handlers hd;

	t_env_init(&n->t, 2, 1, 1);
	t_open(&n->t);
	CHECK_EQ(dn_rpc_create(n->t.s, &bo, &n->b, &hd), 0);
	CHECK_EQ(rpc_server_create(&so, &hd, &n->srv), 0);
	snprintf(n->name, sizeof(n->name), "dn-%u", i);
	snprintf(n->addr, sizeof(n->addr), "127.0.0.1:%d", rpc_server_port(n->srv));
}

static inline void
tn_down(struct tnode *n)
{
	dn_cheal_destroy(n->h);
	rpc_server_destroy(n->srv, 1000);
	dn_rpc_destroy(n->b);
	t_env_fini(&n->t);
}

/* /zest/nodes/<name> as the node's registration would write it (no lease). */
static inline void
tn_register(struct cl_etcd *c, const struct tnode *n)
{
	struct cl_rec_node ni = { .name = (char *)n->name,
		                  .address = (char *)n->addr,
		                  .incarnation = 1,
		                  .state = CL_REC_NODE_UP,
		                  .version = "test" };
	char key[64], why[CL_REC_WHY_MAX];
	uint8_t *buf;
	size_t len;

	snprintf(key, sizeof(key), CL_MEMBERS_NODES_PREFIX "%s", n->name);
	CHECK_EQ(cl_rec_node_encode(&ni, &buf, &len, why, sizeof(why)), 0);
	CHECK_EQ(cl_etcd_put(c, key, strlen(key), buf, len, 0, NULL, 0), 0);
	free(buf);
}

static inline void
tn_unregister(struct cl_etcd *c, const struct tnode *n)
{
	char key[64];
	struct cl_etcd_range r = { .key = key };

	snprintf(key, sizeof(key), CL_MEMBERS_NODES_PREFIX "%s", n->name);
	r.key_len = strlen(key);
	CHECK_EQ(cl_etcd_delete(c, &r, NULL, NULL, 0), 0);
}

struct tn_wait {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool done;
	int err;
};

static inline void
tn_wait_cb(void *arg, int err)
{
	struct tn_wait *w = arg;

	pthread_mutex_lock(&w->mu);
	w->err = err;
	w->done = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->mu);
}

/* Write buf[0..sp->length) as the cell sp names into s, in slices of 1500 bytes, and
 * commit it. */
static inline void
tn_cell_put(struct dn_store *s, const struct dn_cell_spec *sp, const uint8_t *buf)
{
	struct tn_wait w = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0 };
	struct dn_cell_write *cw;
	size_t at = 0;

	CHECK_EQ(dn_cell_write_open(s, sp, &cw), 0);
	while (at < sp->length) {
		struct zc_seg segs[4];
		size_t start = at;
		unsigned n = t_slices_next(buf, &at, sp->length, 1500, segs, 4);

		CHECK_EQ(dn_cell_write_data(cw, start, segs, n), 0);
		for (unsigned i = 0; i < n; i++)
			zc_ref_put(segs[i].ref);
	}
	dn_cell_write_finish(cw, tn_wait_cb, &w);
	pthread_mutex_lock(&w.mu);
	while (!w.done)
		pthread_cond_wait(&w.cond, &w.mu);
	pthread_mutex_unlock(&w.mu);
	CHECK_EQ(w.err, 0);
	CHECK_EQ(dn_cell_commit(s, sp->id), 0);
}

struct tn_rbuf {
	uint8_t *p;
	size_t len, cap;
};

static inline int
tn_rbuf_cb(void *arg, uint64_t off, const struct zc_seg *seg)
{
	struct tn_rbuf *r = arg;

	CHECK_EQ(off, r->len);
	CHECK(r->len + seg->len <= r->cap);
	memcpy(r->p + r->len, seg->ptr, seg->len);
	r->len += seg->len;
	return 0;
}

/* Read cell id of s whole into buf (cap bytes): its length. */
static inline size_t
tn_cell_get(struct dn_store *s, struct dn_cell_id id, uint8_t *buf, size_t cap)
{
	struct tn_rbuf r = { buf, 0, cap };

	CHECK_EQ(dn_cell_read(s, id, 0, 0, false, tn_rbuf_cb, &r), 0);
	return r.len;
}

/* The value of metric name in h's /metrics text. */
static inline uint64_t
tn_metric(struct dn_cheal *h, const char *name)
{
	char *buf = NULL, *at;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	unsigned long long v = ~0ull;

	CHECK(f);
	dn_cheal_metrics(h, f);
	fclose(f);
	at = strstr(buf, name);
	while (at && (at[strlen(name)] != ' ' || (at > buf && at[-1] != '\n')))
		at = strstr(at + 1, name);
	CHECK(at && sscanf(at + strlen(name), " %llu", &v) == 1);
	free(buf);
	return v;
}

/* Which node holds cell c of group g in the record's first extent. */
static inline const char *
tn_cell_node(const struct cl_rec_object *o, unsigned g, unsigned c)
{
	const struct cl_rec_extent *e = &o->extents[0];

	return e->nodes[e->groups[g].cell[c]];
}

/* The to-do key of bucket/key ("bkt/obj"): its value's length (value in buf, cap bytes),
 * or ZC_E(ZC_NO_KEY). */
static inline int
tn_todo_value(struct cl_etcd *c, const char *bucket_key, char *buf, size_t cap)
{
	char k[128];
	struct cl_etcd_kvs kvs = { 0 };
	int rc;

	snprintf(k, sizeof(k), CL_META_HEAL "%s", bucket_key);
	rc = cl_etcd_get(c, k, strlen(k), false, &kvs, 0);
	if (rc == 0) {
		CHECK(kvs.kv[0].value_len < cap);
		memcpy(buf, kvs.kv[0].value, kvs.kv[0].value_len);
		buf[kvs.kv[0].value_len] = '\0';
		rc = (int)kvs.kv[0].value_len;
	}
	cl_etcd_kvs_fini(&kvs);
	return rc;
}

/* A pass on each of the n nodes' healers; the sums in *st. */
static inline void
tn_pass_all(struct tnode *const *nodes, unsigned n, struct dn_cheal_stats *st)
{
	memset(st, 0, sizeof(*st));
	for (unsigned i = 0; i < n; i++)
		CHECK_EQ(dn_cheal_pass(nodes[i]->h, st), 0);
}

#endif
