/*
 * Reads: stripe by stripe, each needed data cell is read whole, checked chunk by chunk
 * against its CRC32C, and handed out in a refcounted buffer the caller may keep. A cell
 * that is missing, on a failed drive, unreadable or fails a CRC makes the stripe degraded:
 * any k good cells rebuild it (ec_codec_decode).
 *
 * The caller's thread submits a stripe's cell reads to their drives' rings at once and
 * sleeps until they complete; the checks and any decode run on the caller's thread.
 * A read is a cursor (struct dn_rcur) stepped a stripe or more at a time, so a thread can
 * leave a read whose consumer is slow and come back to it later; dn_read runs one to the end.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dn_internal.h"

struct rbuf {
	struct zc_ref ref;
	uint8_t data[];
};

static void
rbuf_release(struct zc_ref *ref)
{
	free(ref);
}

void
dn_rctx_init(struct dn_rctx *r, struct dn_store *s, const struct dn_extent *e)
{
	memset(r, 0, sizeof(*r));
	r->s = s;
	r->e = e;
	r->group = UINT32_MAX;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
}

static void
rctx_close(struct dn_rctx *r)
{
	for (unsigned c = 0; c < EC_MAX_CELLS; c++) {
		dn_file_close(r->files[c]);
		r->files[c] = NULL;
	}
	r->open_failed = 0;
}

void
dn_rctx_fini(struct dn_rctx *r)
{
	rctx_close(r);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->cond);
}

static void
read_done(struct dn_io *io)
{
	struct dn_rctx *r = io->arg;

	pthread_mutex_lock(&r->lock);
	if (--r->pending == 0)
		pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

/* Cell c's file in group; opened (and registered) once per group. */
static struct dn_file *
cell_file(struct dn_rctx *r, uint32_t group, unsigned c)
{
	const struct dn_extent *e = r->e;
	struct dn_drive *d = &r->s->drives[e->groups[group].drives[c]];
	char path[PATH_MAX];

	if (r->group != group) {
		rctx_close(r);
		r->group = group;
	}
	if (r->files[c] || (r->open_failed & (1u << c)))
		return r->files[c];
	if (dn_layout_path(d->root, e->id, group, c, path, sizeof(path)) ||
	    dn_file_open_read(d, path, &r->files[c]))
		r->open_failed |= 1u << c;
	return r->files[c];
}

/* Read the cells in mask in parallel and check them; returns the mask of good ones. */
static uint32_t
read_cells(struct dn_rctx *r, uint32_t group, uint32_t stripe, uint32_t mask, uint32_t skip,
           uint8_t **cells, bool *crc_bad)
{
	const struct dn_extent *e = r->e;
	const struct dn_geom *g = &e->g;
	uint32_t good = 0, sent = 0;

	for (unsigned c = 0; c < g->k + g->m; c++) {
		uint32_t len = dn_geom_cell_len(g, group, stripe, c);
		unsigned d = e->groups[group].drives[c];
		struct dn_file *f;
		struct dn_io *io;

		if (!(mask & (1u << c)))
			continue;
		memset(cells[c] + len, 0, g->cell - len);
		if (len == 0) {
			good |= 1u << c; /* past the end of the object: zeros by definition */
			continue;
		}
		if ((skip | e->groups[group].missing) & (1u << c) || d >= r->s->ndrives ||
		    !dn_drive_ok(&r->s->drives[d]))
			continue;
		f = cell_file(r, group, c);
		if (!f)
			continue;
		io = &r->io[c];
		io->op = DN_IO_READ;
		io->file = f;
		io->off = (uint64_t)stripe * g->cell;
		io->iov[0].iov_base = cells[c];
		io->iov[0].iov_len = len;
		io->niov = 1;
		io->len = len;
		io->cb = read_done;
		io->arg = r;
		io->grp = NULL;
		sent |= 1u << c;
		pthread_mutex_lock(&r->lock);
		r->pending++;
		pthread_mutex_unlock(&r->lock);
		dn_drive_submit(f->drive, io);
	}
	pthread_mutex_lock(&r->lock);
	while (r->pending > 0)
		pthread_cond_wait(&r->cond, &r->lock);
	pthread_mutex_unlock(&r->lock);

	for (unsigned c = 0; c < g->k + g->m; c++) {
		const uint32_t *crcs;
		uint64_t off;
		bool ok = true;

		if (!(sent & (1u << c)) || r->io[c].res < 0)
			continue;
		crcs = dn_extent_crcs(e, group, c);
		off = r->io[c].off;
		for (uint32_t at = 0; at < r->io[c].len && ok; at += g->chunk) {
			uint32_t n = (uint32_t)r->io[c].len - at < g->chunk
			                     ? (uint32_t)r->io[c].len - at
			                     : g->chunk;
			size_t idx = (size_t)(off + at) / g->chunk;

			if (zc_crc32c(0, cells[c] + at, n) != crcs[idx]) {
				ZC_WARN("read", "id=%llx group=%u cell=%u chunk=%zu crc mismatch",
				        (unsigned long long)e->id, group, c, idx);
				*crc_bad = true;
				ok = false;
				/* The cell's drive: a rising count names a drive going bad. */
				atomic_fetch_add(
				        &r->s->drives[e->groups[group].drives[c]].crc_mismatches,
				        1);
			}
		}
		if (ok)
			good |= 1u << c;
	}
	return good;
}

int
dn_read_stripe(struct dn_rctx *r, uint32_t group, uint32_t stripe, uint32_t need, uint32_t skip,
               uint8_t **cells, bool *degraded)
{
	const struct dn_extent *e = r->e;
	unsigned n = e->g.k + e->g.m;
	uint32_t all = n == 32 ? UINT32_MAX : (1u << n) - 1, good;
	struct ec_codec *codec;
	bool crc_bad = false;
	int err;

	good = read_cells(r, group, stripe, need, skip, cells, &crc_bad);
	if ((good & need) == need)
		return 0;
	*degraded = true;
	/* Read every other cell at once: one round trip to the drives, not k - good. */
	good |= read_cells(r, group, stripe, all & ~need, skip, cells, &crc_bad);
	if ((unsigned)__builtin_popcount(good) < e->g.k)
		return crc_bad ? -EBADMSG : -EIO;
	err = dn_store_codec(r->s, e->g.k, e->g.m, &codec);
	if (err)
		return err;
	/* Every cell not good is rebuilt; n - good <= m because good >= k. */
	return ec_codec_decode(codec, e->g.cell, cells, all & ~good);
}

/*
 * A read in progress: the object's pieces as looked up at open (a later overwrite does not
 * change what this read returns), where it stands, and the open extent's files. Steps may
 * run on different threads, one at a time.
 */
struct dn_rcur {
	struct dn_store *s;
	struct dn_obj o;
	uint64_t at, end; /* next object byte to deliver, end of the range */
	size_t piece;     /* index of the piece holding `at` */
	uint64_t base;    /* object offset of that piece */
	bool have_ext, degraded;
	bool borrowed; /* e is the hold's copy of an extent freed while held */
	size_t nheld;  /* pieces whose extents this read holds (dn_extent_hold), in order */
	struct dn_extent e;
	struct dn_rctx rc; /* over e while have_ext */
};

static void
rcur_drop_extent(struct dn_rcur *c)
{
	if (!c->have_ext)
		return;
	dn_rctx_fini(&c->rc);
	if (!c->borrowed)
		dn_extent_free(&c->e);
	c->have_ext = false;
}

static void
rcur_unhold(struct dn_rcur *c)
{
	while (c->nheld > 0)
		dn_extent_unhold(c->s, c->o.pieces[--c->nheld].ext_id);
}

/*
 * Hold the extents of the version looked up, and check they are still there: a delete or
 * overwrite committed between the lookup and the holds freed them, and that version is
 * gone (ZC_E(ZC_NO_KEY)); one committed later leaves them to this read.
 */
static int
rcur_hold(struct dn_rcur *c)
{
	int err = 0;

	for (; c->nheld < c->o.npieces; c->nheld++) {
		err = dn_extent_hold(c->s, c->o.pieces[c->nheld].ext_id);
		if (err)
			goto unhold;
	}
	for (size_t i = 0; i < c->o.npieces; i++) {
		err = dn_extent_held_live(c->s, c->o.pieces[i].ext_id);
		if (err <= 0) {
			err = err ? err : ZC_E(ZC_NO_KEY);
			goto unhold;
		}
	}
	return 0;
unhold:
	rcur_unhold(c);
	return err;
}

int
dn_read_open(struct dn_store *s, const char *bucket, const char *key, uint64_t offset,
             uint64_t length, bool has_length, struct dn_object_info *info, struct dn_rcur **out)
{
	struct dn_rcur *c;
	int err;

	if (!bucket || !key || !out)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->s = s;
	err = dn_meta_get_obj(s->meta, bucket, key, &c->o);
	if (err) {
		free(c);
		return err;
	}
	if (offset > c->o.size || (has_length && length > c->o.size - offset)) {
		dn_obj_fini(&c->o);
		free(c);
		return -EINVAL;
	}
	(void)ZC_FAULT(ZC_FP_DN_READ, "extent", 0); /* test builds: call, pause, delay */
	err = rcur_hold(c);
	if (err) {
		dn_obj_fini(&c->o);
		free(c);
		return err;
	}
	c->at = offset;
	c->end = has_length ? offset + length : c->o.size;
	if (info)
		dn_obj_take_info(&c->o, key, info);
	*out = c;
	return 0;
}

/* Deliver the stripe holding c->at (up to the range's end); returns cb's result. */
static int
rcur_stripe(struct dn_rcur *c, dn_read_cb cb, void *arg, uint64_t *delivered)
{
	const struct dn_geom *g = &c->e.g;
	uint64_t sb = dn_geom_stripe_bytes(g), gb = dn_geom_group_bytes(g);
	uint64_t psz = c->o.pieces[c->piece].size;
	uint64_t from = c->at - c->base, to = c->end - c->base < psz ? c->end - c->base : psz;
	uint64_t at = from - from % sb;
	uint32_t group = (uint32_t)(at / gb), stripe = (uint32_t)(at % gb / sb);
	uint64_t lo = from - at, hi = to - at < sb ? to - at : sb;
	unsigned n = g->k + g->m;
	uint32_t need = 0;
	uint8_t *cells[EC_MAX_CELLS];
	struct rbuf *b = malloc(sizeof(*b) + (size_t)n * g->cell);
	struct zc_seg seg;
	int err;

	if (!b)
		return -ENOMEM;
	zc_ref_init(&b->ref, rbuf_release);
	for (unsigned i = 0; i < n; i++)
		cells[i] = b->data + (size_t)i * g->cell;
	for (unsigned i = (unsigned)(lo / g->cell); i < g->k && (uint64_t)i * g->cell < hi; i++)
		need |= 1u << i;
	err = dn_read_stripe(&c->rc, group, stripe, need, 0, cells, &c->degraded);
	if (!err) {
		/* Data cells sit back to back: the stripe's range is one span. */
		seg.ptr = b->data + lo;
		seg.len = hi - lo;
		seg.ref = &b->ref;
		err = cb(arg, c->base + at + lo, &seg);
	}
	zc_ref_put(&b->ref);
	if (!err) {
		c->at += hi - lo;
		*delivered += hi - lo;
	}
	return err;
}

int
dn_read_next(struct dn_rcur *c, uint64_t want, dn_read_cb cb, void *arg)
{
	uint64_t got = 0;
	int err = 0;

	while (c->at < c->end && got < want && !err) {
		if (c->piece >= c->o.npieces)
			return -EIO; /* pieces shorter than the size: corrupt metadata */
		if (c->base + c->o.pieces[c->piece].size <= c->at) {
			rcur_drop_extent(c);
			c->base += c->o.pieces[c->piece].size;
			c->piece++;
			continue;
		}
		if (!c->have_ext) {
			/* held since open: found here even if freed since */
			err = dn_extent_get_held(c->s, c->o.pieces[c->piece].ext_id, &c->e,
			                         &c->borrowed);
			if (err)
				break;
			(void)ZC_FAULT(ZC_FP_DN_READ, "cells", 0); /* before its files open */
			dn_rctx_init(&c->rc, c->s, &c->e);
			c->have_ext = true;
		}
		err = rcur_stripe(c, cb, arg, &got);
	}
	if (err)
		return err;
	return c->at < c->end;
}

void
dn_read_close(struct dn_rcur *c)
{
	if (!c)
		return;
	rcur_drop_extent(c);
	rcur_unhold(c); /* its files closed: an extent freed meanwhile is unlinked now */
	if (c->degraded)
		atomic_fetch_add(&c->s->degraded_reads, 1);
	dn_obj_fini(&c->o);
	free(c);
}

int
dn_read(struct dn_store *s, const char *bucket, const char *key, uint64_t offset, uint64_t length,
        bool has_length, struct dn_object_info *info, dn_read_cb cb, void *arg)
{
	struct dn_rcur *c;
	int err;

	if (!cb)
		return -EINVAL;
	err = dn_read_open(s, bucket, key, offset, length, has_length, info, &c);
	if (err)
		return err;
	err = dn_read_next(c, UINT64_MAX, cb, arg);
	dn_read_close(c);
	if (err < 0 && info)
		dn_object_info_fini(info);
	return err < 0 ? err : 0;
}
