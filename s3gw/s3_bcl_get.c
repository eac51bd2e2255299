/*
 * s3_bcl_get: stat and GET in cluster mode. The record comes from etcd (linearizable);
 * the range is cut into pieces, one per (stripe, data cell) it touches, each a ReadCell
 * of exactly those bytes from the node the record names. Pieces are opened ahead of the
 * consumer up to BCL_PREFETCH_BYTES, and their segments handed on by reference.
 *
 * A piece whose node is not in the live view, whose cell the record marks missing, or
 * whose read fails (node gone, CRC mismatch: DATA_LOSS, a short answer) is rebuilt
 * window by window from k other cells of its stripe (s3_bcl_rebuild); the cell stays
 * counted as unreadable for the rest of the stream, and the stream counts once in
 * zest_degraded_reads_total. Bytes already handed out are never sent again: a read that
 * fails mid-piece goes on from where it stopped. The rebuilt windows go out in buffers of
 * a small pool the stream owns (struct obuf_pool), each back in it when its consumer puts
 * the segment: a degraded GET allocates a few, not one per window.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "s3_bcl_internal.h"
#include "zc.h"

#define RING      16               /* pieces open at once */
#define MAX_FAILS 64               /* cells a stream remembers as unreadable */
#define MAX_DEAD  CL_REC_MAX_CELLS /* nodes a stream remembers as unreachable */
#define OBUF_KEEP 4                /* rebuilt-window buffers a stream keeps for reuse */

struct obuf_pool;

struct piece {
	struct s3_bcl_piece p;
	size_t ext;
	uint64_t done; /* bytes handed out */
	struct bcl_crd *crd;
};

struct failed {
	size_t ext;
	uint32_t group;
	unsigned cell;
};

struct cget {
	struct bcl *b;
	struct cl_rec_object rec;
	uint64_t next, end;      /* object offsets: the first byte not yet in a piece; the end */
	size_t ext;              /* the extent holding `next` */
	uint64_t ext_base;       /* its first object offset */
	struct rpc_client ***cl; /* per extent, per node of its table (NULL: not live) */
	struct piece ring[RING];
	size_t rhead, rn;
	struct failed fails[MAX_FAILS];
	size_t nfails;
	struct rpc_client *dead[MAX_DEAD]; /* did not answer: none of their cells is tried */
	size_t ndead;
	bool counted, warned;
	uint8_t *scratch;
	size_t scratch_len;
	struct obuf_pool *obufs; /* made by the first rebuild */
};

int
s3_bcl_record(struct bcl *b, const char *bucket, const char *key, struct cl_rec_object *o)
{
	unsigned ms = s3_bcl_etcd_ms(b);
	int rc;

	if (!ms)
		return ZC_E(ZC_UNAVAILABLE);
	rc = s3_bcl_etcd_end(b, cl_meta_get(b->etcd, bucket, key, false, o, NULL, ms));
	if (rc == -EBADMSG) {
		/* a record that does not decode (cl_meta_get logged why): no client's digest
		 * failed, the store is wrong: InternalError, and counted */
		atomic_fetch_add(&b->bad_records, 1);
		return ZC_E(ZC_INTERNAL);
	}
	return rc;
}

int
s3_bcl_stat(void *ctx, const char *bucket, const char *key, struct s3_obj_info *out)
{
	struct bcl *b = ctx;
	struct cl_rec_object o;
	int rc;

	/* linearizable (a quorum read): S3 is read-after-write consistent for PUT, overwrite
	 * and DELETE, and a member's local state may lag the commit (docs/cluster.md) */
	rc = s3_bcl_record(b, bucket, key, &o);
	if (rc < 0)
		return rc;
	s3_bcl_info_from(&o, key, out);
	cl_rec_object_fini(&o);
	return 0;
}

/* The clients of extent x's nodes, resolved once per stream. */
static struct rpc_client **
ext_clients(struct cget *g, size_t x)
{
	const struct cl_rec_extent *e = &g->rec.extents[x];
	const struct cl_members_view *v;

	if (g->cl[x])
		return g->cl[x];
	g->cl[x] = calloc(e->nnodes ? e->nnodes : 1, sizeof(**g->cl));
	if (!g->cl[x])
		return NULL;
	v = cl_members_get(g->b->mem);
	for (size_t i = 0; i < e->nnodes; i++)
		g->cl[x][i] = s3_bcl_node_client(g->b, v, e->nodes[i]);
	cl_members_view_put(v);
	return g->cl[x];
}

static bool
is_dead(const struct cget *g, const struct rpc_client *cl)
{
	for (size_t i = 0; i < g->ndead; i++)
		if (g->dead[i] == cl)
			return true;
	return false;
}

/* A node that did not answer (refused, reset: the rpc's UNAVAILABLE) is passed over for
 * the rest of the stream, rather than tried again for each of its cells. */
static void
note_error(struct cget *g, struct rpc_client *cl, int err)
{
	if (zc_err_is(err, ZC_UNAVAILABLE) && cl && !is_dead(g, cl) && g->ndead < MAX_DEAD)
		g->dead[g->ndead++] = cl;
}

/* Cells of a group this stream cannot read: marked missing, not live, or failed. */
static uint32_t
unavail_of(struct cget *g, size_t x, uint32_t group)
{
	const struct cl_rec_extent *e = &g->rec.extents[x];
	struct rpc_client **cl = ext_clients(g, x);
	uint32_t u = e->groups[group].missing;

	for (unsigned c = 0; c < e->k + e->m; c++)
		if (!cl || !cl[e->groups[group].cell[c]] ||
		    is_dead(g, cl[e->groups[group].cell[c]]))
			u |= 1u << c;
	for (size_t i = 0; i < g->nfails; i++)
		if (g->fails[i].ext == x && g->fails[i].group == group)
			u |= 1u << g->fails[i].cell;
	return u;
}

static void
mark_failed(struct cget *g, size_t x, uint32_t group, unsigned cell)
{
	for (size_t i = 0; i < g->nfails; i++)
		if (g->fails[i].ext == x && g->fails[i].group == group && g->fails[i].cell == cell)
			return;
	/* a full list forgets: such a cell is tried (and fails) again, the bytes stay right */
	if (g->nfails < MAX_FAILS)
		g->fails[g->nfails++] = (struct failed){ x, group, cell };
}

static uint64_t
open_bytes(const struct cget *g)
{
	uint64_t n = 0;

	for (size_t i = 0; i < g->rn; i++) {
		const struct piece *p = &g->ring[(g->rhead + i) % RING];

		n += p->p.len - p->done;
	}
	return n;
}

/* Open the pieces ahead, up to the prefetch bound (always one). */
static void
fill(struct cget *g)
{
	while (g->rn < RING && g->next < g->end) {
		const struct cl_rec_extent *e;
		struct s3_bcl_geom geom;
		struct piece *p;
		struct rpc_client **cl;

		while (g->next >= g->ext_base + g->rec.extents[g->ext].size) {
			g->ext_base += g->rec.extents[g->ext].size;
			g->ext++;
		}
		e = &g->rec.extents[g->ext];
		s3_bcl_geom_of(e, &geom);
		p = &g->ring[(g->rhead + g->rn) % RING];
		memset(p, 0, sizeof(*p));
		s3_bcl_piece_at(&geom, g->next - g->ext_base, g->end - g->ext_base, &p->p);
		if (g->rn && open_bytes(g) + p->p.len > BCL_PREFETCH_BYTES)
			break;
		p->ext = g->ext;
		cl = ext_clients(g, g->ext);
		if (!(unavail_of(g, g->ext, p->p.group) & (1u << p->p.cell)) &&
		    s3_bcl_crd_open(cl[e->groups[p->p.group].cell[p->p.cell]], e->id, p->p.group,
		                    p->p.cell, p->p.off, p->p.len, g->b->read_timeout_ms,
		                    &p->crd) < 0) {
			p->crd = NULL;
			mark_failed(g, g->ext, p->p.group, p->p.cell);
		}
		g->next += p->p.len;
		g->rn++;
	}
}

struct rd_arg {
	struct cget *g;
	size_t ext;
	uint32_t group;
};

static void
rebuild_read(void *arg, struct s3_bcl_cread *r, size_t n)
{
	struct rd_arg *a = arg;
	const struct cl_rec_extent *e = &a->g->rec.extents[a->ext];
	struct rpc_client **ecl = ext_clients(a->g, a->ext);
	struct rpc_client *cl[CL_REC_MAX_CELLS];

	for (size_t i = 0; i < n; i++)
		cl[i] = ecl ? ecl[e->groups[a->group].cell[r[i].cell]] : NULL;
	s3_bcl_read_ranges(cl, e->id, a->group, r, n, a->g->b->read_timeout_ms);
	for (size_t i = 0; i < n; i++)
		if (r[i].res < 0)
			note_error(a->g, cl[i], r[i].res);
}

/* A rebuilt window handed out by reference. */
struct obuf {
	struct zc_ref ref;
	struct obuf_pool *pool;
	struct obuf *next; /* on the pool's free list */
	size_t cap;
	uint8_t data[];
};

/* Buffers of one stream. A segment may outlive the stream (the consumer puts it after
 * get_close), and is put on whatever thread sends it: the pool counts one reference for
 * the stream and one per buffer out, and the last one frees it. */
struct obuf_pool {
	pthread_mutex_t mu;
	unsigned refs;
	struct obuf *free; /* up to OBUF_KEEP */
	unsigned nfree;
	bool closed; /* the stream is gone: buffers put now are freed */
};

static void
obuf_pool_unref_locked(struct obuf_pool *pl)
{
	bool last = --pl->refs == 0;

	pthread_mutex_unlock(&pl->mu);
	if (!last)
		return;
	while (pl->free) {
		struct obuf *o = pl->free;

		pl->free = o->next;
		free(o);
	}
	pthread_mutex_destroy(&pl->mu);
	free(pl);
}

static void
obuf_release(struct zc_ref *ref)
{
	struct obuf *o = (struct obuf *)ref;
	struct obuf_pool *pl = o->pool;

	pthread_mutex_lock(&pl->mu);
	if (pl->nfree < OBUF_KEEP && !pl->closed) {
		o->next = pl->free;
		pl->free = o;
		pl->nfree++;
	} else {
		free(o);
	}
	obuf_pool_unref_locked(pl);
}

/* A buffer of at least cap bytes from g's pool (made on first use), its ref held by the
 * caller. NULL: -ENOMEM. */
static struct obuf *
obuf_get(struct cget *g, size_t cap)
{
	struct obuf_pool *pl = g->obufs;
	struct obuf *o;

	if (!pl) {
		pl = calloc(1, sizeof(*pl));
		if (!pl)
			return NULL;
		pthread_mutex_init(&pl->mu, NULL);
		pl->refs = 1; /* the stream's */
		g->obufs = pl;
	}
	pthread_mutex_lock(&pl->mu);
	o = pl->free;
	if (o) {
		pl->free = o->next;
		pl->nfree--;
	}
	if (o && o->cap < cap) { /* a short piece's: too small for this window */
		free(o);
		o = NULL;
	}
	if (!o) {
		o = malloc(sizeof(*o) + cap);
		if (!o) {
			pthread_mutex_unlock(&pl->mu);
			return NULL;
		}
		o->pool = pl;
		o->cap = cap;
	}
	pl->refs++;
	pthread_mutex_unlock(&pl->mu);
	zc_ref_init(&o->ref, obuf_release);
	return o;
}

static void
obuf_pool_close(struct obuf_pool *pl)
{
	if (!pl)
		return;
	pthread_mutex_lock(&pl->mu);
	pl->closed = true;
	obuf_pool_unref_locked(pl);
}

/* The next window of a piece that must be rebuilt, as one segment of its own memory. */
static int
rebuild_step(struct cget *g, struct piece *p, struct zc_seg *seg)
{
	const struct cl_rec_extent *e = &g->rec.extents[p->ext];
	struct rd_arg arg = { g, p->ext, p->p.group };
	struct s3_bcl_geom geom;
	struct ec_codec *codec = s3_bcl_codec(g->b, e->k, e->m);
	uint64_t x = p->p.x + p->done, y;
	uint32_t before, unavail;
	size_t w = s3_bcl_window(e->k, e->m);
	struct obuf *o;
	int rc;

	if (!codec)
		return -ENOMEM;
	if (!g->counted) {
		g->counted = true;
		atomic_fetch_add(&g->b->degraded_reads, 1);
	}
	s3_bcl_geom_of(e, &geom);
	y = p->p.x + p->p.len < x + w ? p->p.x + p->p.len : x + w;
	if (g->scratch_len < (size_t)(e->k + e->m) * w) {
		free(g->scratch);
		g->scratch_len = (size_t)(e->k + e->m) * w;
		g->scratch = malloc(g->scratch_len);
		if (!g->scratch) {
			g->scratch_len = 0;
			return -ENOMEM;
		}
	}
	o = obuf_get(g, (size_t)(y - x));
	if (!o)
		return -ENOMEM;
	before = unavail = unavail_of(g, p->ext, p->p.group) | 1u << p->p.cell;
	rc = s3_bcl_rebuild(codec, &geom, p->p.group, p->p.stripe, p->p.cell, x, y, &unavail,
	                    rebuild_read, &arg, g->scratch, o->data);
	for (unsigned c = 0; c < e->k + e->m; c++)
		if ((unavail & ~before) & (1u << c))
			mark_failed(g, p->ext, p->p.group, c);
	if (rc < 0) {
		zc_ref_put(&o->ref);
		ZC_ERR("s3cl",
		       "extent=%016llx group=%u stripe=%u cell=%u unreadable: fewer than "
		       "k=%u cells left (unavailable mask 0x%x)",
		       (unsigned long long)e->id, p->p.group, p->p.stripe, p->p.cell, e->k,
		       unavail);
		return rc == -EIO ? ZC_E(ZC_UNAVAILABLE) : rc;
	}
	*seg = (struct zc_seg){ o->data, (size_t)(y - x), &o->ref };
	p->done += y - x;
	return 1;
}

static bool
piece_node_dead(struct cget *g, const struct piece *p)
{
	const struct cl_rec_extent *e = &g->rec.extents[p->ext];
	struct rpc_client **ecl = ext_clients(g, p->ext);

	return ecl && is_dead(g, ecl[e->groups[p->p.group].cell[p->p.cell]]);
}

int
s3_bcl_get_next(void *stream, struct zc_seg *seg)
{
	struct cget *g = stream;

	for (;;) {
		struct piece *p;
		int rc;

		fill(g);
		if (!g->rn)
			return 0;
		p = &g->ring[g->rhead];
		if (p->crd && piece_node_dead(g, p)) {
			/* opened before its node was found hung or gone: not waited for again */
			s3_bcl_crd_close(p->crd);
			p->crd = NULL;
			mark_failed(g, p->ext, p->p.group, p->p.cell);
		}
		if (p->crd) {
			rc = s3_bcl_crd_next(p->crd, seg);
			if (rc == 1 && seg->len <= p->p.len - p->done) {
				p->done += seg->len;
				return 1;
			}
			if (rc == 1) { /* more than asked for: treat the cell as bad */
				if (seg->ref)
					zc_ref_put(seg->ref);
				rc = -EBADMSG;
			}
			s3_bcl_crd_close(p->crd);
			p->crd = NULL;
			if (rc < 0) {
				const struct cl_rec_extent *e = &g->rec.extents[p->ext];

				struct rpc_client **ecl = ext_clients(g, p->ext);

				/* once per stream: a dead node fails many pieces */
				if (!g->warned)
					ZC_WARN("s3cl",
					        "extent=%016llx group=%u cell=%u read failed "
					        "err=%s: "
					        "rebuilding from parity",
					        (unsigned long long)e->id, p->p.group, p->p.cell,
					        zc_code_word(zc_err_code(rc)));
				g->warned = true;
				mark_failed(g, p->ext, p->p.group, p->p.cell);
				if (ecl)
					note_error(g, ecl[e->groups[p->p.group].cell[p->p.cell]],
					           rc);
			}
		}
		if (p->done == p->p.len) {
			g->rhead = (g->rhead + 1) % RING;
			g->rn--;
			continue;
		}
		return rebuild_step(g, p, seg);
	}
}

/*
 * Whether every piece of [g->next, g->end) can be read or rebuilt from what the record
 * and the membership view say now (cells marked missing, nodes not live): a GET that
 * cannot be served is refused before its head (503 SlowDown, retryable) rather than cut
 * after a 200. A group with at least k cells left is readable whole; only a group with
 * fewer is walked piece by piece (a range may need none of its lost cells). Nodes that
 * fail during the GET are still met by the rebuild, after the head. 0 or ZC_E(ZC_UNAVAILABLE).
 */
static int
check_readable(struct cget *g, const char *bucket, const char *key)
{
	static _Atomic uint64_t last_log_ns;
	uint64_t base = 0;

	for (size_t x = 0; x < g->rec.nextents && base < g->end; base += g->rec.extents[x++].size) {
		const struct cl_rec_extent *e = &g->rec.extents[x];
		uint64_t gb = (uint64_t)e->k * e->cell_size * e->stripes_per_group, at, to;
		struct s3_bcl_geom geom;

		if (base + e->size <= g->next || !gb)
			continue;
		s3_bcl_geom_of(e, &geom);
		at = g->next > base ? g->next - base : 0;
		to = g->end - base < e->size ? g->end - base : e->size;
		while (at < to) {
			uint32_t grp = (uint32_t)(at / gb), u, src;
			uint64_t gend =
			        ((uint64_t)grp + 1) * gb < to ? ((uint64_t)grp + 1) * gb : to;

			if (grp >= e->ngroups)
				break; /* past the record's groups: the read itself says so */
			u = unavail_of(g, x, grp);
			for (uint64_t a = at; (unsigned)__builtin_popcount(u) > e->m && a < gend;) {
				struct s3_bcl_piece p;
				uint64_t now;

				s3_bcl_piece_at(&geom, a, gend, &p);
				a += p.len;
				if (!(u & (1u << p.cell)) ||
				    s3_bcl_sources(&geom, grp, p.stripe, p.cell, p.x, u, &src) == 0)
					continue;
				now = zc_now_ns();
				if (now - atomic_load(&last_log_ns) >= 1000000000u) {
					atomic_store(&last_log_ns, now);
					ZC_WARN("s3cl",
					        "GET %s/%s refused (503): extent=%016llx "
					        "group=%u below k=%u cells live (mask 0x%x)",
					        bucket, key, (unsigned long long)e->id, grp, e->k,
					        u);
				}
				atomic_fetch_add(&g->b->unreadable_gets, 1);
				return ZC_E(ZC_UNAVAILABLE);
			}
			at = gend;
		}
	}
	return 0;
}

void
s3_bcl_get_close(void *stream)
{
	struct cget *g = stream;

	if (!g)
		return;
	for (size_t i = 0; i < g->rn; i++)
		s3_bcl_crd_close(g->ring[(g->rhead + i) % RING].crd);
	for (size_t x = 0; g->cl && x < g->rec.nextents; x++)
		free(g->cl[x]);
	free(g->cl);
	free(g->scratch);
	obuf_pool_close(g->obufs);
	cl_rec_object_fini(&g->rec);
	free(g);
}

int
s3_bcl_get_open(void *ctx, const char *bucket, const char *key, uint64_t off, uint64_t len,
                bool has_len, struct s3_obj_info *info, void **stream)
{
	struct bcl *b = ctx;
	struct cget *g;
	int rc;

	*stream = NULL;
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->b = b;
	/* linearizable, as stat */
	rc = s3_bcl_record(b, bucket, key, &g->rec);
	if (rc < 0) {
		free(g);
		return rc;
	}
	s3_bcl_info_from(&g->rec, key, info);
	if (off >= g->rec.size) { /* nothing to read: the caller decides */
		s3_bcl_get_close(g);
		return 0;
	}
	g->cl = calloc(g->rec.nextents, sizeof(*g->cl));
	if (!g->cl) {
		s3_bcl_get_close(g);
		return -ENOMEM;
	}
	g->next = off;
	g->end = has_len && len < g->rec.size - off ? off + len : g->rec.size;
	rc = check_readable(g, bucket, key);
	if (rc < 0) {
		s3_bcl_get_close(g);
		return rc;
	}
	*stream = g;
	return 0;
}
