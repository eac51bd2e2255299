/*
 * dn_coord_write: a coordinated write's begin and data. Each segment is folded into the
 * stripe's parity where it lies (ec_stripe_add) and queued, with a reference, for its data
 * cell; a data cell's queue goes to its cell (a WriteCell message to the peer, or the local
 * cell store) when the cell's share of the stripe is complete, so a message is a cell's
 * worth of receive slices and no byte is copied. Parity goes out of the pool's buffers
 * when its stripe closes; a group's streams end with its last stripe.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "dn_coord_internal.h"
#include "zc_crc.h"
#include "zc.h"

#define PBUF_WAIT_NS (2ull * 1000000000ull)

int
dn_coord_begin(struct dn_coord *c, const char *bucket, const char *key, uint64_t size,
               bool size_known, unsigned k, unsigned m, struct dn_coord_write **out, char *msg,
               size_t cap)
{
	const struct cl_members_view *v;
	struct dn_coord_write *w;
	pthread_condattr_t ca;
	int rc;

	if (!size_known) {
		/* The cells' lengths go in their WriteCell opens. */
		snprintf(msg, cap, "cluster mode needs the object's size when the write opens");
		return ZC_E(ZC_INVALID);
	}
	if (!k) {
		k = c->o.k;
		m = c->o.m;
	}
	if (!k || !m || k + m > EC_MAX_CELLS) {
		snprintf(msg, cap, "scheme %u+%u out of range", k, m);
		return ZC_E(ZC_INVALID);
	}
	rc = dn_coord_bucket_check(c, bucket, msg, cap);
	if (rc)
		return rc;
	/* the placement view: drained and maintenance nodes get no new cell */
	v = cl_members_get_place(c->o.members);
	if (!v->n) {
		cl_members_view_put(v);
		snprintf(msg, cap, "no live nodes in the membership view");
		return ZC_E(ZC_UNAVAILABLE);
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		cl_members_view_put(v);
		snprintf(msg, cap, "out of memory");
		return -ENOMEM;
	}
	w->c = c;
	w->view = v;
	w->self = -1;
	for (size_t i = 0; i < v->n; i++)
		if (!strcmp(v->names[i], c->node))
			w->self = (int)i;
	w->size = size;
	w->k = k;
	w->m = m;
	w->n = k + m;
	w->quorum = c->o.write_quorum ? c->o.write_quorum : k + 1;
	if (w->quorum > w->n)
		w->quorum = w->n;
	if (w->quorum < k)
		w->quorum = k;
	w->cell = c->o.cell_size;
	w->spg = c->o.stripes_per_group;
	w->ngroups = dn_coord_ngroups(size, k, w->cell, w->spg);
	w->bucket = strdup(bucket);
	w->key = strdup(key);
	w->groups = calloc(w->ngroups ? w->ngroups : 1, sizeof(*w->groups));
	w->node_failed = calloc(v->n, sizeof(*w->node_failed));
	pthread_mutex_init(&w->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cond, &ca);
	pthread_condattr_destroy(&ca);
	rc = !w->bucket || !w->key || !w->groups || !w->node_failed ? -ENOMEM : 0;
	if (!rc)
		rc = dn_store_codec(c->o.store, k, m, &w->codec);
	/* A random id, never 0: two coordinators never need to agree on one. */
	while (!rc && !w->id)
		if (getrandom(&w->id, sizeof(w->id), 0) != sizeof(w->id))
			rc = -errno;
	if (rc) {
		snprintf(msg, cap, "cannot begin the write: %s", strerror(-rc));
		dn_coord_write_free(w);
		return rc;
	}
	/* an empty object has no group, so nothing to lose */
	rc = w->ngroups ? dn_coord_place_check(w, msg, cap) : 0;
	if (rc) {
		dn_coord_write_free(w);
		return rc;
	}
	*out = w;
	return 0;
}

void
dn_coord_write_free(struct dn_coord_write *w)
{
	if (!w)
		return;
	for (unsigned j = 0; j < EC_MAX_CELLS; j++)
		for (size_t i = 0; i < w->npend[j]; i++)
			if (w->pend[j][i].ref)
				zc_ref_put(w->pend[j][i].ref);
	if (w->stripe_open)
		for (unsigned p = 0; p < w->m; p++)
			zc_ref_put(&w->par[p]->ref);
	for (uint32_t g = 0; g < w->opened; g++) {
		if (!w->groups[g])
			continue;
		for (unsigned i = 0; i < w->n; i++) {
			if (w->groups[g]->cells[i].rw)
				rpc_cwrite_destroy(w->groups[g]->cells[i].rw);
			if (w->groups[g]->cells[i].lw)
				dn_cell_write_abort(w->groups[g]->cells[i].lw);
		}
		free(w->groups[g]);
	}
	cl_meta_old_fini(&w->old);
	if (w->view)
		cl_members_view_put(w->view);
	free(w->groups);
	free(w->node_failed);
	free(w->bucket);
	free(w->key);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cond);
	free(w);
}

/* Hand data cell j's queued segments (of the current group) to its cell, then drop ours. */
static int
flush_data(struct dn_coord_write *w, unsigned j)
{
	struct cgroup *g = w->groups[w->opened - 1];
	int rc;

	if (!w->npend[j])
		return 0;
	rc = dn_coord_cell_send(&g->cells[j], w->pend[j], w->npend[j], w->pend_len[j]);
	for (size_t i = 0; i < w->npend[j]; i++)
		if (w->pend[j][i].ref)
			zc_ref_put(w->pend[j][i].ref);
	w->npend[j] = 0;
	w->pend_len[j] = 0;
	return rc;
}

static int
pend_add(struct dn_coord_write *w, unsigned j, const uint8_t *p, size_t len, struct zc_ref *ref)
{
	while (len > 0) {
		/* a piece larger than a message (big cells, the copy marshaller's one buffer
		 * per chunk) is cut, each part holding its own ref */
		size_t n = len < DN_COORD_MSG_MAX ? len : DN_COORD_MSG_MAX;
		struct zc_seg *s;

		if (w->npend[j] == DN_COORD_PEND_MAX || w->pend_len[j] + n > DN_COORD_MSG_MAX) {
			int rc = flush_data(w, j);

			if (rc)
				return rc;
		}
		s = &w->pend[j][w->npend[j]++];
		s->ptr = p;
		s->len = n;
		s->ref = ref;
		if (ref)
			zc_ref_get(ref);
		w->pend_len[j] += n;
		p += n;
		len -= n;
	}
	return 0;
}

static int
stripe_open(struct dn_coord_write *w, char *msg, size_t cap)
{
	uint8_t *par[EC_MAX_CELLS];
	int rc;

	if (w->stripe == 0) {
		rc = dn_coord_group_open(w, w->opened, msg, cap);
		if (rc)
			return rc;
	}
	for (unsigned p = 0; p < w->m; p++) {
		w->par[p] = dn_coord_pbuf_get(w->c, PBUF_WAIT_NS);
		if (!w->par[p]) {
			for (unsigned q = 0; q < p; q++)
				zc_ref_put(&w->par[q]->ref);
			snprintf(msg, cap,
			         "the coordinator's parity buffers are busy, retry later");
			return -EAGAIN;
		}
		par[p] = w->par[p]->buf;
	}
	ec_stripe_init(&w->st, w->codec, w->cell, par);
	w->stripe_open = true;
	w->dcell = 0;
	w->fill = 0;
	return 0;
}

/* The stripe is complete (or the object ended in it): its parity to the parity cells; at
 * the group's last stripe, end every cell of the group. */
static int
stripe_close(struct dn_coord_write *w)
{
	struct cgroup *g = w->groups[w->opened - 1];
	size_t len = ec_stripe_parity_len(&w->st);
	int rc = 0;

	for (unsigned p = 0; p < w->m; p++) {
		/* in messages of at most DN_COORD_MSG_MAX, each holding its own ref */
		for (size_t off = 0; off < len && !rc; off += DN_COORD_MSG_MAX) {
			size_t n = len - off < DN_COORD_MSG_MAX ? len - off : DN_COORD_MSG_MAX;
			struct zc_seg seg = { w->par[p]->buf + off, n, &w->par[p]->ref };

			rc = dn_coord_cell_send(&g->cells[w->k + p], &seg, 1, n);
		}
		zc_ref_put(&w->par[p]->ref);
	}
	w->stripe_open = false;
	if (++w->stripe == w->spg || w->written == w->size) {
		w->stripe = 0;
		for (unsigned i = 0; i < w->n; i++)
			dn_coord_cell_end(&g->cells[i]);
	}
	return rc;
}

static void
poison(struct dn_coord_write *w, int rc, char *msg, size_t cap)
{
	if (zc_err_is(rc, ZC_NO_QUORUM) && !strstr(msg, "quorum")) {
		pthread_mutex_lock(&w->mu);
		for (uint32_t g = 0; g < w->opened; g++) {
			uint32_t live = dn_coord_group_live(w, w->groups[g]);

			if (!dn_coord_group_ok(w, w->groups[g], live)) {
				dn_coord_group_msg(w, w->groups[g], live, "left", msg, cap);
				break;
			}
		}
		pthread_mutex_unlock(&w->mu);
	}
	w->err = rc;
}

int
dn_coord_data(struct dn_coord_write *w, uint64_t offset, const struct zc_seg *segs, size_t n,
              uint32_t crc32c, char *msg, size_t cap)
{
	uint64_t total = 0;
	uint32_t crc = 0;
	int rc = 0;

	msg[0] = 0;
	if (w->err) {
		snprintf(msg, cap, "the write failed earlier");
		return w->err;
	}
	for (size_t i = 0; i < n; i++) {
		total += segs[i].len;
		crc = zc_crc32c(crc, segs[i].ptr, segs[i].len);
	}
	if (offset != w->written || total > w->size - w->written) {
		snprintf(msg, cap, "data at %llu+%llu does not follow %llu of %llu bytes",
		         (unsigned long long)offset, (unsigned long long)total,
		         (unsigned long long)w->written, (unsigned long long)w->size);
		w->err = ZC_E(ZC_INVALID);
		return w->err;
	}
	if (crc != crc32c) {
		snprintf(msg, cap,
		         "CRC32C mismatch at offset %llu: the %llu bytes sent do not match crc32c "
		         "%08x",
		         (unsigned long long)offset, (unsigned long long)total, crc32c);
		w->err = -EBADMSG;
		return w->err;
	}
	w->crc = zc_crc32c_combine(w->crc, crc, total);
	for (size_t i = 0; i < n && !rc; i++) {
		const uint8_t *p = segs[i].ptr;
		size_t len = segs[i].len;

		while (len > 0) {
			size_t take;

			if (!w->stripe_open) {
				rc = stripe_open(w, msg, cap);
				if (rc)
					break;
			}
			take = w->cell - w->fill < len ? w->cell - w->fill : len;
			ec_stripe_add(&w->st, w->dcell, p, take);
			rc = pend_add(w, w->dcell, p, take, segs[i].ref);
			if (rc)
				break;
			w->fill += (uint32_t)take;
			w->written += take;
			p += take;
			len -= take;
			if (w->fill == w->cell || w->written == w->size) {
				rc = flush_data(w, w->dcell);
				w->fill = 0;
				if (!rc && (++w->dcell == w->k || w->written == w->size))
					rc = stripe_close(w);
				if (rc)
					break;
			}
		}
	}
	/* The writer made progress: its pending cells keep their grace (at most a round per
	 * grace / 4); a write that stalled past its commit deadline stops here. */
	if (!rc) {
		rc = dn_coord_touch(w, false);
		if (zc_err_is(rc, ZC_UNAVAILABLE)) {
			dn_coord_grace_msg(w, msg, cap);
			ZC_WARN("coord", "write of %s/%s extent %016" PRIx64 " refused: %s",
			        w->bucket, w->key, w->id, msg);
		} else {
			rc = 0; /* out of memory: the next round tries again */
		}
	}
	if (rc)
		poison(w, rc, msg, cap);
	return rc;
}
