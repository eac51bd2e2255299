/*
 * dn_coord: the coordinator's lifecycle, its parity buffer pool, the rpc clients of its
 * peers and its metrics (dn_coord_internal.h says which file holds what).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dn_coord_internal.h"
#include "zc.h"

const double dn_coord_hist_bounds_s[DN_COORD_HIST_BUCKETS] = {
	0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5,
};

void
dn_coord_hist_add(struct dn_coord_hist *h, uint64_t ns)
{
	unsigned b = 0;

	while (b < DN_COORD_HIST_BUCKETS && (double)ns / 1e9 > dn_coord_hist_bounds_s[b])
		b++;
	atomic_fetch_add_explicit(&h->b[b], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->sum_ns, ns, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
}

uint64_t
dn_coord_realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------ parity pool */

/* The last reference went (gRPC sent the bytes, the ring wrote them): back to the pool. */
static void
pbuf_release(struct zc_ref *ref)
{
	struct dn_coord_pbuf *p = (struct dn_coord_pbuf *)ref;
	struct dn_coord *c = p->c;

	pthread_mutex_lock(&c->mu);
	p->next = c->pfree;
	c->pfree = p;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->mu);
}

/* A buffer with one reference (the caller's), or NULL when none came back within wait_ns:
 * the pool is the write path's memory bound, never grown. */
struct dn_coord_pbuf *
dn_coord_pbuf_get(struct dn_coord *c, uint64_t wait_ns)
{
	struct timespec dl;
	struct dn_coord_pbuf *p;

	zc_deadline(&dl, CLOCK_MONOTONIC, wait_ns);
	pthread_mutex_lock(&c->mu);
	while (!c->pfree)
		if (pthread_cond_timedwait(&c->cond, &c->mu, &dl) == ETIMEDOUT && !c->pfree)
			break;
	p = c->pfree;
	if (p)
		c->pfree = p->next;
	pthread_mutex_unlock(&c->mu);
	if (p)
		zc_ref_init(&p->ref, pbuf_release);
	return p;
}

/* ------------------------------------------------------------------ peers */

struct dn_coord_peer *
dn_coord_peer(struct dn_coord *c, const char *name, const char *addr)
{
	struct dn_coord_peer *p;
	struct rpc_client_opts co = { 0 };
	int rc;

	pthread_mutex_lock(&c->mu);
	for (p = c->peers; p; p = p->next)
		if (!strcmp(p->name, name) && !strcmp(p->addr, addr))
			break;
	if (p) {
		pthread_mutex_unlock(&c->mu);
		return p;
	}
	/* Created under the lock: rare (once per peer address), and it only connects
	 * lazily, so it does not wait for the network. */
	p = calloc(1, sizeof(*p));
	if (!p)
		goto out;
	p->name = strdup(name);
	p->addr = strdup(addr);
	co.target = addr;
	co.max_inflight = c->o.peer_window;
	/* CommitCells / DeleteCells. The WriteCell streams time out on progress instead (a
	 * full window or a missing answer for peer_timeout_ms): a slow client's upload is not
	 * a stuck peer. */
	co.unary_deadline_ms = DN_COORD_CALL_DEADLINE_MS;
	co.tls = c->o.tls;
	co.peer_name = name; /* its certificate must name it (docs/cluster.md, "Security") */
	rc = p->name && p->addr ? rpc_client_create(&co, &p->cli) : -ENOMEM;
	if (rc) {
		ZC_ERR("coord", "no client for peer=%s addr=%s err=%d", name, addr, rc);
		free(p->name);
		free(p->addr);
		free(p);
		p = NULL;
		goto out;
	}
	atomic_init(&p->fwd_bytes, 0);
	p->next = c->peers;
	c->peers = p;
out:
	pthread_mutex_unlock(&c->mu);
	return p;
}

int
dn_coord_bucket_check(struct dn_coord *c, const char *bucket, char *msg, size_t cap)
{
	uint64_t now = zc_now_ns();
	int rc;

	if (strlen(bucket) >= sizeof(c->buckets[0].name))
		goto ask;
	pthread_mutex_lock(&c->mu);
	for (unsigned i = 0; i < DN_COORD_BUCKETS; i++)
		if (c->buckets[i].until_ns > now && !strcmp(c->buckets[i].name, bucket)) {
			pthread_mutex_unlock(&c->mu);
			return 0;
		}
	pthread_mutex_unlock(&c->mu);
ask:
	rc = cl_meta_bucket_head(c->o.etcd, bucket, NULL, c->o.etcd_timeout_ms);
	if (zc_err_is(rc, ZC_NO_BUCKET)) {
		snprintf(msg, cap, "%s", bucket);
		return rc;
	}
	if (rc) {
		snprintf(msg, cap, "cannot read bucket %s from etcd: %s", bucket,
		         rc > -ZC_ERR_BASE ? strerror(-rc) : zc_code_word(zc_err_code(rc)));
		/* etcd away: backpressure (SlowDown), not the cells' write quorum */
		return rc == -ETIMEDOUT || zc_err_is(rc, ZC_NO_QUORUM) ? ZC_E(ZC_UNAVAILABLE) : rc;
	}
	if (strlen(bucket) < sizeof(c->buckets[0].name)) {
		pthread_mutex_lock(&c->mu);
		snprintf(c->buckets[c->next_bucket].name, sizeof(c->buckets[0].name), "%s", bucket);
		c->buckets[c->next_bucket].until_ns = now + DN_COORD_BUCKET_TTL_NS;
		c->next_bucket = (c->next_bucket + 1) % DN_COORD_BUCKETS;
		pthread_mutex_unlock(&c->mu);
	}
	return 0;
}

void
dn_coord_followup_add(struct dn_coord *c, long d)
{
	pthread_mutex_lock(&c->mu);
	c->followups += d;
	if (!c->followups)
		pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->mu);
}

/* ------------------------------------------------------------------ lifecycle */

int
dn_coord_create(const struct dn_coord_opts *o, struct dn_coord **out)
{
	struct dn_coord *c;
	pthread_condattr_t ca;
	size_t cell;

	if (!o || !o->store || !o->etcd || !o->members || !o->node)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->o = *o;
	if (!c->o.k) {
		c->o.k = 4;
		c->o.m = 2;
	}
	if (!c->o.cell_size)
		c->o.cell_size = 1u << 20;
	if (!c->o.stripes_per_group)
		c->o.stripes_per_group = 16;
	if (!c->o.peer_timeout_ms)
		c->o.peer_timeout_ms = 10000;
	if (!c->o.peer_window)
		c->o.peer_window = 4u << 20;
	if (!c->o.parity_bufs) {
		/* 64 MiB of them, and room for 4 Writes' stripes whatever the cell size */
		c->o.parity_bufs = (unsigned)((64u << 20) / c->o.cell_size);
		if (c->o.parity_bufs > 64)
			c->o.parity_bufs = 64;
		if (c->o.parity_bufs < 4 * c->o.m)
			c->o.parity_bufs = 4 * c->o.m;
	}
	if (c->o.k + c->o.m > EC_MAX_CELLS || !c->o.m || c->o.cell_size % 4096) {
		free(c);
		return -EINVAL;
	}
	c->node = strdup(o->node);
	pthread_mutex_init(&c->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the waits' deadlines */
	pthread_cond_init(&c->cond, &ca);
	pthread_condattr_destroy(&ca);
	cell = c->o.cell_size;
	c->npbufs = c->o.parity_bufs;
	c->pmem = calloc(c->npbufs, sizeof(*c->pmem));
	c->pbytes = aligned_alloc(4096, cell * c->npbufs);
	if (!c->node || !c->pmem || !c->pbytes) {
		dn_coord_destroy(c);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < c->npbufs; i++) {
		c->pmem[i].c = c;
		c->pmem[i].buf = c->pbytes + i * cell;
		c->pmem[i].next = c->pfree;
		c->pfree = &c->pmem[i];
	}
	*out = c;
	return 0;
}

void
dn_coord_destroy(struct dn_coord *c)
{
	struct dn_coord_peer *p, *next;
	struct timespec dl;

	if (!c)
		return;
	/* Follow-up calls end by their deadline at the latest (a peer that stopped answering);
	 * a client may only go once its calls are done. */
	zc_deadline(&dl, CLOCK_MONOTONIC, (DN_COORD_CALL_DEADLINE_MS / 1000 + 2) * 1000000000ull);
	pthread_mutex_lock(&c->mu);
	if (c->followups)
		ZC_INFO("coord", "waiting for %ld follow-up calls to peers", c->followups);
	while (c->followups > 0)
		if (pthread_cond_timedwait(&c->cond, &c->mu, &dl) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&c->mu);
	if (c->followups) {
		/* Not reached while gRPC keeps its deadlines; never free a client in use. */
		ZC_ERR("coord", "%ld follow-up calls outlived their deadline: clients kept",
		       c->followups);
		c->peers = NULL;
	}
	for (p = c->peers; p; p = next) {
		next = p->next;
		rpc_client_destroy(p->cli);
		free(p->name);
		free(p->addr);
		free(p);
	}
	free(c->pmem);
	free(c->pbytes);
	free(c->node);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cond);
	free(c);
}

/* ------------------------------------------------------------------ metrics */

static void
hist_print(FILE *out, const char *name, const struct dn_coord_hist *h)
{
	unsigned long long cum = 0;

	for (unsigned b = 0; b < DN_COORD_HIST_BUCKETS; b++) {
		cum += atomic_load(&h->b[b]);
		fprintf(out, "%s_bucket{le=\"%g\"} %llu\n", name, dn_coord_hist_bounds_s[b], cum);
	}
	cum += atomic_load(&h->b[DN_COORD_HIST_BUCKETS]);
	fprintf(out, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.9f\n%s_count %llu\n", name, cum, name,
	        (double)atomic_load(&h->sum_ns) / 1e9, name,
	        (unsigned long long)atomic_load(&h->count));
}

void
dn_coord_metrics(struct dn_coord *c, FILE *out)
{
	const struct cl_members_view *v;
	struct zc_place_slots sl;
	int ft = 0, zft = 0, self = -1;

	if (!c)
		return;
	fprintf(out, "# HELP zest_cluster_forwarded_bytes_total Cell bytes this coordinator sent "
	             "to each peer (data and parity).\n"
	             "# TYPE zest_cluster_forwarded_bytes_total counter\n");
	pthread_mutex_lock(&c->mu);
	for (struct dn_coord_peer *p = c->peers; p; p = p->next) {
		unsigned long long sum = 0;
		struct dn_coord_peer *q;

		/* One series per name: a peer that came back on another address has a client
		 * per address. The first of a name in the list prints the sum. */
		for (q = c->peers; q != p && strcmp(q->name, p->name); q = q->next)
			;
		if (q != p)
			continue;
		for (; q; q = q->next)
			if (!strcmp(q->name, p->name))
				sum += atomic_load(&q->fwd_bytes);
		fprintf(out, "zest_cluster_forwarded_bytes_total{peer=\"%s\"} %llu\n", p->name,
		        sum);
	}
	pthread_mutex_unlock(&c->mu);
	fprintf(out, "# HELP zest_cluster_peer_write_seconds WriteCell streams to peers, open to "
	             "acknowledgement.\n"
	             "# TYPE zest_cluster_peer_write_seconds histogram\n");
	hist_print(out, "zest_cluster_peer_write_seconds", &c->peer_hist);
	fprintf(out, "# HELP zest_cluster_etcd_txn_seconds The commit Txns of coordinated "
	             "writes.\n"
	             "# TYPE zest_cluster_etcd_txn_seconds histogram\n");
	hist_print(out, "zest_cluster_etcd_txn_seconds", &c->etcd_hist);
	/* What a group placed now gets, by the write quorum's own measure
	 * (dn_coord_tolerance): the live view moves with nodes coming and going, before any
	 * write shows it. Every group over a view holds as many cells per node (the rounds
	 * rule), so any key tells. */
	v = cl_members_get_place(c->o.members);
	for (size_t i = 0; i < v->n; i++)
		if (!strcmp(v->names[i], c->node))
			self = (int)i;
	if (dn_coord_view_spread(v, self, c->o.k, c->o.m, &sl, &zft) == 0)
		ft = dn_coord_tolerance(sl.node, c->o.k + c->o.m,
		                        dn_coord_all_cells(c->o.k + c->o.m), c->o.k);
	cl_members_view_put(v);
	fprintf(out,
	        "# HELP zest_cluster_fault_tolerance_nodes Nodes a block group placed now over "
	        "the live view survives losing (any of them): a write needs write quorum - k.\n"
	        "# TYPE zest_cluster_fault_tolerance_nodes gauge\n"
	        "zest_cluster_fault_tolerance_nodes %d\n"
	        "# HELP zest_cluster_fault_tolerance_zones Whole zones (--zone) a block group "
	        "placed now over the live view may lose with every object readable (k cells "
	        "left).\n"
	        "# TYPE zest_cluster_fault_tolerance_zones gauge\n"
	        "zest_cluster_fault_tolerance_zones %d\n",
	        ft, zft < 0 ? 0 : zft);
}
