/*
 * The healer's drains and progress (dn_cheal.h): which cells a drain moves, the count of
 * cells records name on this node, the progress key /zest/healstat/<node> put after every
 * pass (cl_healstat.h), and a decommissioned node's leaving.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "dn_cheal_internal.h"
#include "cl_health.h"
#include "cl_members.h"
#include "zc.h"

#define MEMBERS_KEY "/zest/members/"
/* A decommission mark this young (s) may not be in every writer's placement view yet:
 * a node leaves only after a clean count that started later than that. */
#define MARK_SETTLE_S 5

uint64_t
chl_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t
chl_cell_bytes(const struct cl_rec_extent *e, size_t g)
{
	uint64_t gb = (uint64_t)e->k * e->cell_size * e->stripes_per_group;
	uint64_t start = (uint64_t)g * gb, gl;

	if (!e->k || start >= e->size)
		return 0;
	gl = e->size - start < gb ? e->size - start : gb;
	return (gl + e->k - 1) / e->k;
}

uint32_t
chl_drain_cells(const struct cl_members_view *v, const struct cl_rec_extent *e,
                const struct cl_rec_group *gr, uint32_t skip)
{
	uint32_t out = 0;

	if (!cl_members_ndraining(v))
		return 0;
	for (unsigned c = 0; c < e->k + e->m; c++) {
		const char *n = e->nodes[gr->cell[c]];

		/* an absent draining node's cells are the absence heal's, not a move's */
		if (!(skip & (1u << c)) && cl_members_draining(v, n) && chl_view_find(v, n) >= 0)
			out |= 1u << c;
	}
	return out;
}

void
chl_own_count(struct dn_cheal *h, const struct chl_obj *o, struct chl_acc *acc)
{
	for (size_t x = 0; x < o->rec.nextents; x++) {
		const struct cl_rec_extent *e = &o->rec.extents[x];

		for (size_t g = 0; g < e->ngroups; g++)
			for (unsigned c = 0; c < e->k + e->m; c++)
				if (strcmp(e->nodes[e->groups[g].cell[c]], h->node) == 0) {
					acc->own_cells++;
					acc->own_bytes += chl_cell_bytes(e, g);
				}
	}
}

static int
put_stat(struct dn_cheal *h)
{
	char key[sizeof(CL_HEALSTAT_PREFIX) + CL_REC_MAX_NAME], val[CL_HEALSTAT_CAP];
	int kl = snprintf(key, sizeof(key), CL_HEALSTAT_PREFIX "%s", h->node);
	int vl = cl_healstat_format(&h->stat, val, sizeof(val));
	int rc = chl_ensure_lease(h);

	if (rc)
		return rc;
	if (kl < 0 || (size_t)kl >= sizeof(key) || vl < 0)
		return -ENAMETOOLONG;
	/* under the lock lease: a node that dies takes its progress with it */
	return cl_etcd_put(h->o.etcd, key, (size_t)kl, val, (size_t)vl, h->lease, NULL,
	                   chl_timeout(h));
}

/* This node holds no named cell and is to leave: stop its registration, then delete its
 * keys in one Txn (a repeat deletes nothing). */
static int
retire(struct dn_cheal *h)
{
	static const char *const prefixes[] = { CL_MEMBERS_NODES_PREFIX, MEMBERS_KEY,
		                                CL_MEMBERS_DRAIN_PREFIX, CL_HEALTH_CELLCHECK,
		                                CL_HEALSTAT_PREFIX };
	enum { NK = sizeof(prefixes) / sizeof(prefixes[0]) };
	char keys[NK][64 + CL_REC_MAX_NAME];
	struct cl_etcd_op ops[NK];
	struct cl_etcd_txn txn = { NULL, 0, ops, NK, NULL, 0 };
	int rc;

	ZC_INFO("cheal", "node=%s decommissioned: no record names a cell here; leaving the cluster",
	        h->node);
	if (h->o.retire)
		h->o.retire(h->o.retire_arg);
	for (size_t i = 0; i < NK; i++) {
		int n = snprintf(keys[i], sizeof(keys[i]), "%s%s", prefixes[i], h->node);

		ops[i] = (struct cl_etcd_op){ .type = CL_ETCD_OP_DELETE,
			                      .r = { .key = keys[i], .key_len = (size_t)n } };
	}
	rc = cl_etcd_txn(h->o.etcd, &txn, NULL, chl_timeout(h));
	if (rc == 0)
		h->retired = true;
	return rc;
}

int
chl_stat_pass(struct dn_cheal *h, const struct cl_members_view *v, const struct chl_acc *acc,
              bool scanned, bool clean)
{
	struct cl_healstat *s = &h->stat, old = h->stat;
	const struct cl_members_mark *dm = cl_members_mark_of(v, h->node, CL_MEMBERS_DECOMMISSION);
	const struct cl_members_mark *dr =
	        dm ? dm : cl_members_mark_of(v, h->node, CL_MEMBERS_DRAIN);
	uint64_t now = chl_wall_ms();

	if (!old.t_ms)
		old.own_cells = old.own_bytes = -1;
	s->t_ms = now;
	s->passes = atomic_load(&h->passes);
	s->pending_cells = acc->pending;
	s->pending_bytes = acc->pending_bytes;
	s->healed_cells = atomic_load(&h->healed);
	s->healed_bytes = atomic_load(&h->healed_bytes);
	s->prev_t_ms = old.t_ms;
	s->prev_healed_cells = old.healed_cells;
	s->prev_healed_bytes = old.healed_bytes;
	if (scanned) {
		s->own_cells = (int64_t)acc->own_cells;
		s->own_bytes = (int64_t)acc->own_bytes;
		s->own_t_ms = now;
		s->prev_own_cells = old.own_cells;
		s->prev_own_t_ms = old.own_t_ms;
		/* v is the view this pass started with: its records were read after the mark */
		s->own_drain_s = dr ? dr->at_s : 0;
	} else if (!old.t_ms) {
		s->own_cells = s->own_bytes = s->prev_own_cells = -1;
	}
	atomic_store(&h->pending_bytes, acc->pending_bytes);
	atomic_store(&h->own_cells, scanned ? acc->own_cells : atomic_load(&h->own_cells));
	if (dm && scanned && clean && acc->own_cells == 0 &&
	    (int64_t)(h->pass_wall_ms / 1000) - dm->at_s >= MARK_SETTLE_S)
		return retire(h);
	return put_stat(h);
}
