/*
 * The cell collector (dn_cgc.h). Cells come in name order, so the cells of one extent are
 * neighbours and share one record read: a pass costs two etcd Ranges per extent (its index
 * key, then the record it names), not per cell.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dn_cgc.h"
#include "cl_meta.h"
#include "cl_index.h"
#include "zc.h"
#include "zc_loop.h"

#define PAGE 256 /* cells per listing */

struct dn_cgc {
	struct dn_cgc_opts o;
	char *node;
	struct zc_loop loop; /* the dn-cgc thread */
	atomic_uint_fast64_t n_commit, n_delete, n_retire, n_error;
};

/* The record of one extent (through the index) as last read, and at which consistency. */
struct look {
	bool valid;
	uint64_t id;
	bool linear;   /* read linearizable */
	int status;    /* 0: record in obj; 1: none; < 0: unknown (error, undecodable) */
	char *rkey;    /* the record's etcd key, as the index names it (NULL: no index key) */
	int64_t rrev;  /* its mod_revision (0: absent) */
	bool unlinked; /* a dangling index key was dealt with */
	bool fenced;   /* cl_meta_extent_fence went in: no commit can name the extent now */
	struct cl_rec_object obj;
};

static uint64_t
real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void
look_clear(struct look *l)
{
	free(l->rkey);
	cl_rec_object_fini(&l->obj);
	memset(l, 0, sizeof(*l));
}

static bool
extent_names(const struct cl_rec_extent *e, const struct dn_cell_info *ci, const char *node)
{
	const struct cl_rec_group *gr;

	if (e->id != ci->id.extent || ci->id.group >= e->ngroups || ci->id.cell >= e->k + e->m)
		return false;
	gr = &e->groups[ci->id.group];
	return gr->cell[ci->id.cell] < e->nnodes &&
	       strcmp(e->nodes[gr->cell[ci->id.cell]], node) == 0 &&
	       !(gr->missing & (1u << ci->id.cell));
}

/* The record of extent id: /zest/extents/<id> names its key (the cell entry's bucket/key is
 * the key the coordinator wrote, which a multipart Complete deletes). */
static int
fetch(struct dn_cgc *g, struct look *l, uint64_t id, bool linear)
{
	int err;

	look_clear(l);
	l->valid = true;
	l->id = id;
	l->linear = linear;
	err = cl_meta_extent_record(g->o.etcd, id, !linear, &l->obj, &l->rkey, &l->rrev,
	                            g->o.timeout_ms);
	l->status = zc_err_is(err, ZC_NO_KEY) ? 1 : err;
	return l->status < 0 ? l->status : 0;
}

/* 1: the record names ci on this node; 0: it does not; < 0: cannot tell. */
static int
judge(struct dn_cgc *g, struct look *l, const struct dn_cell_info *ci)
{
	if (l->status < 0)
		return l->status;
	for (size_t i = 0; l->status == 0 && i < l->obj.nextents; i++)
		if (extent_names(&l->obj.extents[i], ci, g->node))
			return 1;
	return 0;
}

/*
 * An index key naming a record that lacks the extent (absent, or another extent): left by
 * a write etcd refused with every index op (cl_meta_commit). Judged on a linearizable
 * read; removed by a Txn fenced on both keys, so any node may do it, and once.
 */
static void
unlink_dangling(struct dn_cgc *g, struct look *l)
{
	int err;

	if (l->unlinked || !l->linear || !l->rkey || l->status < 0)
		return;
	l->unlinked = true;
	for (size_t i = 0; l->status == 0 && i < l->obj.nextents; i++)
		if (l->obj.extents[i].id == l->id)
			return; /* the record has the extent: the index is right */
	err = cl_meta_extent_unlink(g->o.etcd, l->id, l->rkey, l->rrev, g->o.timeout_ms);
	if (err < 0)
		ZC_WARN("cgc", "index key of extent=%016llx left err=%d", (unsigned long long)l->id,
		        err);
	else if (err)
		ZC_INFO("cgc", "removed dangling index key of extent=%016llx naming %s",
		        (unsigned long long)l->id, l->rkey);
}

/*
 * Before pending cells of an extent no record has are deleted: the fence, so that a
 * commit Txn of the extent still on its way (sent before its deadline, held by a
 * partition) fails instead of naming them afterwards. 1 fenced; 0 the index gained a key
 * meanwhile (a commit went in: judged again in the next pass); or an etcd error. An
 * extent some record has needs none: its commit went in already.
 */
static int
fence(struct dn_cgc *g, struct look *l)
{
	int err;

	for (size_t i = 0; l->status == 0 && i < l->obj.nextents; i++)
		if (l->obj.extents[i].id == l->id)
			return 1;
	if (l->fenced)
		return 1;
	err = cl_meta_extent_fence(g->o.etcd, l->id, g->o.timeout_ms);
	if (err == 1)
		l->fenced = true;
	else if (err == 0)
		l->valid = false; /* read again */
	return err;
}

static bool
same_look(const struct look *l, const struct dn_cell_info *ci)
{
	return l->valid && l->id == ci->id.extent;
}

/* Delete ci if its entry is still the one listed (not touched, committed, retired, or
 * deleted and written again since): one metadata transaction decides. 1 deleted, 0 not. */
static int
delete_cell(struct dn_cgc *g, const struct dn_cell_info *ci)
{
	return dn_cell_delete_if(g->o.store, ci);
}

/*
 * Settle one cell: commit (pending and named), delete (not named, confirmed by a
 * linearizable read) or keep. *fetched: an etcd read was made (for the scan's pace).
 */
static int
settle(struct dn_cgc *g, struct look *l, const struct dn_cell_info *ci, struct dn_cgc_stats *st,
       bool *fetched)
{
	int v, err;

	if (!same_look(l, ci)) {
		fetch(g, l, ci->id.extent, false);
		*fetched = true;
	}
	v = judge(g, l, ci);
	if (v == 0 && !l->linear) {
		/* Confirm before an act that cannot be undone: a lagging member may miss a
		 * recent commit. */
		fetch(g, l, ci->id.extent, true);
		*fetched = true;
		v = judge(g, l, ci);
	}
	if (v == 0)
		unlink_dangling(g, l);
	if (v < 0) {
		ZC_WARN("cgc",
		        "cell extent=%016llx group=%u cell=%u bucket=%s key=%s left as is err=%d",
		        (unsigned long long)ci->id.extent, ci->id.group, ci->id.cell, ci->bucket,
		        ci->key, v);
		atomic_fetch_add(&g->n_error, 1);
		st->errors++;
		return v;
	}
	if (v == 1) {
		if (!ci->pending) {
			st->kept++;
			return 0;
		}
		err = dn_cell_commit(g->o.store, ci->id);
		if (!err) {
			atomic_fetch_add(&g->n_commit, 1);
			st->committed++;
		}
		return zc_err_is(err, ZC_NO_KEY) ? 0 : err;
	}
	if (!ci->pending) {
		/* A committed cell nobody names: a GET may still be reading the record that
		 * named it, so it is retired, and deleted after the read grace. */
		err = dn_cell_retire(g->o.store, ci->id);
		if (err == 1) {
			ZC_INFO("cgc",
			        "retired cell extent=%016llx group=%u cell=%u bucket=%s key=%s",
			        (unsigned long long)ci->id.extent, ci->id.group, ci->id.cell,
			        ci->bucket, ci->key);
			atomic_fetch_add(&g->n_retire, 1);
			st->retired++;
		}
		return err < 0 ? err : 0;
	}
	err = fence(g, l);
	if (err <= 0) {
		if (err < 0) {
			atomic_fetch_add(&g->n_error, 1);
			st->errors++;
		}
		return err;
	}
	err = delete_cell(g, ci);
	if (err == 1) {
		ZC_INFO("cgc",
		        "deleted cell extent=%016llx group=%u cell=%u bucket=%s key=%s pending",
		        (unsigned long long)ci->id.extent, ci->id.group, ci->id.cell, ci->bucket,
		        ci->key);
		atomic_fetch_add(&g->n_delete, 1);
		st->deleted++;
	}
	return err < 0 ? err : 0;
}

static uint64_t
grace_ns(const struct dn_cgc *g)
{
	return g->o.grace_ns ? g->o.grace_ns : (uint64_t)DN_CGC_DEFAULT_GRACE_S * 1000000000u;
}

static uint64_t
read_grace_ns(const struct dn_cgc *g)
{
	return g->o.read_grace_ns ? g->o.read_grace_ns : grace_ns(g);
}

/* An etcd error ends a pass (etcd is away: the next pass tries again); a cell's own
 * trouble (undecodable record, a store error) does not. */
static bool
is_etcd_err(int err)
{
	return zc_err_is(err, ZC_NO_QUORUM) || zc_err_is(err, ZC_UNAVAILABLE) ||
	       zc_err_is(err, ZC_SLOW_DOWN) || err == -EIO;
}

static bool
stopping(struct dn_cgc *g)
{
	return zc_loop_stopping(&g->loop);
}

int
dn_cgc_pass_pending(struct dn_cgc *g, uint64_t now_real_ns, struct dn_cgc_stats *st)
{
	struct dn_cgc_stats local = { 0 };
	struct dn_cell_info *v = NULL;
	struct look l = { 0 };
	size_t n = 0;
	uint64_t now = now_real_ns ? now_real_ns : real_ns(), grace = grace_ns(g);
	int err, first = 0;

	if (!st)
		st = &local;
	if (now <= grace)
		return 0;
	/* One page per pass: a cell left for an error waits for the next pass rather than
	 * being listed again at once. */
	err = dn_cell_list_pending_older(g->o.store, now - grace, 4 * PAGE, &v, &n);
	if (err)
		return err;
	for (size_t i = 0; i < n && !stopping(g); i++) {
		bool fetched = false;

		err = settle(g, &l, &v[i], st, &fetched);
		if (err && is_etcd_err(err)) {
			first = err;
			break;
		}
	}
	look_clear(&l);
	dn_cell_list_free(v, n);
	return first;
}

int
dn_cgc_pass_retired(struct dn_cgc *g, uint64_t now_real_ns, struct dn_cgc_stats *st)
{
	struct dn_cgc_stats local = { 0 };
	struct dn_cell_info *v = NULL;
	size_t n = 0;
	uint64_t now = now_real_ns ? now_real_ns : real_ns(), grace = read_grace_ns(g);
	int err;

	if (!st)
		st = &local;
	if (now <= grace)
		return 0;
	/* No etcd: the retirement was the verdict (a DeleteCells after the Txn that replaced
	 * the record, or this collector's own "not named"); only the readers are waited for. */
	err = dn_cell_list_retired_older(g->o.store, now - grace, 4 * PAGE, &v, &n);
	if (err)
		return err;
	for (size_t i = 0; i < n && !stopping(g); i++) {
		int e = delete_cell(g, &v[i]);

		if (e == 1) {
			ZC_INFO("cgc",
			        "deleted cell extent=%016llx group=%u cell=%u bucket=%s key=%s "
			        "retired",
			        (unsigned long long)v[i].id.extent, v[i].id.group, v[i].id.cell,
			        v[i].bucket, v[i].key);
			atomic_fetch_add(&g->n_delete, 1);
			st->deleted++;
		} else if (e < 0 && !err) {
			err = e;
		}
	}
	dn_cell_list_free(v, n);
	return err;
}

static void
pace(struct dn_cgc *g)
{
	unsigned rate = g->o.scan_rate ? g->o.scan_rate : 200;

	(void)zc_loop_wait(&g->loop, 1000000000u / rate);
}

int
dn_cgc_pass_scan(struct dn_cgc *g, bool rate_limited, struct dn_cgc_stats *st)
{
	struct dn_cgc_stats local = { 0 };
	struct dn_cell_id after = { 0 };
	struct look l = { 0 };
	uint64_t young = real_ns() - grace_ns(g);
	bool have_after = false;
	int err = 0;

	if (!st)
		st = &local;
	while (!err && !stopping(g)) {
		struct dn_cell_info *v = NULL;
		size_t n = 0;

		err = dn_cell_list(g->o.store, have_after ? &after : NULL, PAGE, &v, &n);
		if (err || !n) {
			dn_cell_list_free(v, n);
			break;
		}
		for (size_t i = 0; i < n && !err && !stopping(g); i++) {
			bool fetched = false;
			int e;

			if (v[i].retired)
				continue; /* judged already: the retired pass deletes it */
			if (v[i].pending && (v[i].created_ns >= young || v[i].touched_ns >= young))
				continue; /* its coordinator may still commit it */
			e = settle(g, &l, &v[i], st, &fetched);
			if (e && is_etcd_err(e))
				err = e;
			if (fetched && rate_limited)
				pace(g);
		}
		after = v[n - 1].id;
		have_after = true;
		dn_cell_list_free(v, n);
	}
	look_clear(&l);
	return err;
}

static bool
wait_for(struct dn_cgc *g, uint64_t ns)
{
	return zc_loop_wait(&g->loop, ns);
}

static void *
run(void *arg)
{
	struct dn_cgc *g = arg;
	uint64_t period = g->o.period_ns, scan = g->o.scan_period_ns;
	uint64_t next_scan;

	if (!period) {
		period = (grace_ns(g) < read_grace_ns(g) ? grace_ns(g) : read_grace_ns(g)) / 4;
		if (period > 60000000000ull)
			period = 60000000000ull;
		if (period < 100000000ull)
			period = 100000000ull;
	}
	if (!scan) {
		/* Every hour, or 8 graces when that is shorter (short graces are tests'): the
		 * scan is what finds the cells whose DeleteCells a partition lost. */
		scan = 3600000000000ull;
		if (grace_ns(g) < scan / 8 && read_grace_ns(g) < scan / 8)
			scan = 8 * (grace_ns(g) > read_grace_ns(g) ? grace_ns(g) : read_grace_ns(g));
	}
	/* The first scan after one scan period: a restart storm does not scan at once. */
	next_scan = scan == UINT64_MAX ? UINT64_MAX : zc_now_ns() + scan;
	while (wait_for(g, period)) {
		int err = dn_cgc_pass_pending(g, 0, NULL);

		if (err)
			ZC_WARN("cgc", "pending pass stopped err=%d (%s)", err,
			        zc_code_word(zc_err_code(err)));
		err = dn_cgc_pass_retired(g, 0, NULL);
		if (err)
			ZC_WARN("cgc", "retired pass stopped err=%d", err);
		if (zc_now_ns() >= next_scan) {
			err = dn_cgc_pass_scan(g, true, NULL);
			if (err)
				ZC_WARN("cgc", "scan stopped err=%d (%s)", err,
				        zc_code_word(zc_err_code(err)));
			next_scan = zc_now_ns() + scan;
		}
	}
	return NULL;
}

int
dn_cgc_create(const struct dn_cgc_opts *o, struct dn_cgc **out)
{
	struct dn_cgc *g;

	if (!o || !o->store || !o->etcd || !o->node || !o->node[0] || !out)
		return -EINVAL;
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->o = *o;
	g->node = strdup(o->node);
	if (!g->node) {
		free(g);
		return -ENOMEM;
	}
	g->o.node = g->node;
	zc_loop_init(&g->loop);
	if (!o->no_thread && zc_loop_start(&g->loop, "dn-cgc", run, g)) {
		dn_cgc_destroy(g);
		return -EAGAIN;
	}
	*out = g;
	return 0;
}

void
dn_cgc_stop(struct dn_cgc *g)
{
	if (g)
		zc_loop_stop(&g->loop);
}

void
dn_cgc_destroy(struct dn_cgc *g)
{
	if (!g)
		return;
	dn_cgc_stop(g);
	zc_loop_fini(&g->loop);
	free(g->node);
	free(g);
}

void
dn_cgc_metrics(struct dn_cgc *g, FILE *out)
{
	fprintf(out,
	        "# HELP zest_cluster_gc_cells_total Cells the collector settled: pending ones "
	        "committed or deleted, committed ones retired, retired ones deleted.\n"
	        "# TYPE zest_cluster_gc_cells_total counter\n"
	        "zest_cluster_gc_cells_total{action=\"commit\"} %llu\n"
	        "zest_cluster_gc_cells_total{action=\"delete\"} %llu\n"
	        "zest_cluster_gc_cells_total{action=\"retire\"} %llu\n"
	        "# HELP zest_cells_retired_total Committed cells retired (their record replaced or "
	        "deleted), kept for --read-grace after their extent's last read.\n"
	        "# TYPE zest_cells_retired_total counter\n"
	        "zest_cells_retired_total %llu\n"
	        "# HELP zest_cluster_gc_errors_total Cells the collector could not judge.\n"
	        "# TYPE zest_cluster_gc_errors_total counter\n"
	        "zest_cluster_gc_errors_total %llu\n",
	        (unsigned long long)atomic_load(&g->n_commit),
	        (unsigned long long)atomic_load(&g->n_delete),
	        (unsigned long long)atomic_load(&g->n_retire),
	        (unsigned long long)dn_cell_retired_total(g->o.store),
	        (unsigned long long)atomic_load(&g->n_error));
}
