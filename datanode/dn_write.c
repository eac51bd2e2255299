/*
 * The write pipeline: segments are fed to the streaming encoder where they lie and each
 * data cell's fragments become one WRITEV (up to DN_IOV_MAX iovecs) as soon as the cell is
 * full; parity cells go out as WRITE_FIXED from registered pool buffers once a stripe is
 * complete. Every io holds one zc_ref per segment it writes; its completion puts them.
 *
 * Completion order: the writer holds a bias of 1 on `outstanding`; every submitted io adds
 * one. Each block group counts its own ios the same way, with a bias the writer drops when
 * it moves to the next group: when a group drains, its files are fdatasynced and then
 * closed, so a large object holds the files of only a group or two open (registered-file
 * slots and fds stay bounded) and durability work starts early. When the write drains
 * (SYNC), the folders of its new files are fsynced; then the commit thread commits the
 * metadata and calls back.
 */
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dn_internal.h"

enum phase { PH_WRITE, PH_SYNC };

struct wgroup {
	uint32_t idx;
	uint8_t drives[EC_MAX_CELLS];
	atomic_uint missing;
	atomic_uint full; /* missing cells lost to a full drive (ENOSPC) */
	struct dn_file *files[EC_MAX_CELLS];
	struct ec_chunk_crc cc[EC_MAX_CELLS];
	uint32_t *crcs[EC_MAX_CELLS];
	uint64_t file_off[EC_MAX_CELLS];
	uint32_t created;        /* cells whose file was created (writer thread) */
	atomic_long outstanding; /* ios in flight + the writer's bias while current */
	int phase;               /* 0 writing, 1 syncing: changed by whoever drains it */
};

struct dn_write {
	struct dn_store *s;
	char *bucket, *key;
	uint64_t size;
	bool size_known;
	struct ec_codec *codec;
	unsigned k, m, n;
	uint32_t cell, spg, chunk;
	uint64_t id;
	uint64_t written;
	uint32_t crc;
	int err; /* poisoned: first error */
	/* Current position. */
	uint32_t stripe; /* in the current group */
	unsigned dcell;  /* data cell being filled */
	uint32_t fill;   /* bytes in it */
	bool stripe_open;
	struct ec_stripe st;
	int pbuf[EC_MAX_CELLS];
	uint8_t pdrive[EC_MAX_CELLS];
	struct dn_io *pending[EC_MAX_CELLS];
	struct wgroup **groups;
	uint32_t ngroups, cap_groups;
	/* Completion. */
	atomic_long outstanding;
	enum phase phase;
	bool aborted;
	atomic_bool doomed; /* aborted or failed: groups skip their fsync */
	bool group_held;    /* the writer still holds the last group's bias */
	uint8_t drives_used[DN_MAX_DRIVES];
	char *etag;
	struct dn_attr *attrs;
	size_t nattrs;
	bool has_cond; /* cond (its if_match owned) is checked in the commit transaction */
	struct dn_cond cond;
	dn_commit_cb cb;
	void *cb_arg;
	struct dn_job job;
	struct dn_file *dirs[DN_MAX_DRIVES];
};

static void write_unhold(struct dn_write *w);
static void submit(struct dn_write *w, struct dn_io *io);
static int submit_sync(struct dn_write *w, enum dn_io_op op, struct dn_file *file, void *grp,
		       unsigned cell);
static void io_done(struct dn_io *io);

/* Drop one count on a group; the last one syncs its files, then closes them. */
static void
group_unhold(struct dn_write *w, struct wgroup *g)
{
	if (atomic_fetch_sub(&g->outstanding, 1) != 1)
		return;
	if (g->phase == 0 && !atomic_load(&w->doomed)) {
		g->phase = 1;
		atomic_store(&g->outstanding, 1);
		for (unsigned c = 0; c < w->n; c++) {
			if (!g->files[c] || (atomic_load(&g->missing) & (1u << c)))
				continue;
			if (submit_sync(w, DN_IO_FSYNC, g->files[c], g, c) < 0)
				atomic_fetch_or(&g->missing, 1u << c);
		}
		group_unhold(w, g);
		return;
	}
	for (unsigned c = 0; c < w->n; c++) {
		dn_file_close(g->files[c]);
		g->files[c] = NULL;
	}
}

static void
release_group(struct dn_write *w)
{
	if (w->group_held) {
		w->group_held = false;
		group_unhold(w, w->groups[w->ngroups - 1]);
	}
}

/* ---- group setup ---- */
static int
group_start(struct dn_write *w)
{
	struct dn_store *s = w->s;
	struct wgroup *g, **ng;
	unsigned base = atomic_fetch_add(&s->next_base, 1), got = 0;
	bool used[DN_MAX_DRIVES] = { false };
	size_t ncrc = (size_t)w->spg * (w->cell / w->chunk);
	int err;

	if (w->ngroups == w->cap_groups) {
		uint32_t cap = w->cap_groups ? w->cap_groups * 2 : 4;

		ng = realloc(w->groups, cap * sizeof(*ng));
		if (!ng)
			return -ENOMEM;
		w->groups = ng;
		w->cap_groups = cap;
	}
	release_group(w);
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->idx = w->ngroups;
	atomic_init(&g->outstanding, 1);
	/*
	 * Rotate the first drive per group; prefer writable drives, fill up with failed or
	 * full ones, whose cells are missing from the start (no I/O is tried on them).
	 */
	for (unsigned pass = 0; pass < 2 && got < w->n; pass++)
		for (unsigned i = 0; i < s->ndrives && got < w->n; i++) {
			unsigned d = (base + i) % s->ndrives;
			bool writable = used[d] ? false : dn_drive_writable(&s->drives[d]);

			if (used[d] || (pass == 0 && !writable))
				continue;
			used[d] = true;
			if (!writable) {
				atomic_fetch_or(&g->missing, 1u << got);
				if (atomic_load(&s->drives[d].state) == DN_DRIVE_FULL)
					atomic_fetch_or(&g->full, 1u << got);
			}
			g->drives[got++] = (uint8_t)d;
		}
	for (unsigned c = 0; c < w->n; c++) {
		g->crcs[c] = malloc(ncrc * sizeof(uint32_t));
		if (!g->crcs[c]) {
			err = -ENOMEM;
			goto free_g;
		}
		ec_chunk_crc_init(&g->cc[c], w->chunk, g->crcs[c], ncrc);
	}
	w->groups[w->ngroups++] = g;
	w->group_held = true;
	return 0;
free_g:
	for (unsigned c = 0; c < w->n; c++)
		free(g->crcs[c]);
	free(g);
	return err;
}

/* The file of cell c in group g, opened on first use; NULL when its drive is out. */
static struct dn_file *
group_file(struct dn_write *w, struct wgroup *g, unsigned c)
{
	struct dn_drive *d = &w->s->drives[g->drives[c]];
	char path[PATH_MAX];
	int err;

	if (atomic_load(&g->missing) & (1u << c))
		return NULL; /* lost already (a failed write): send it nothing more */
	if (g->files[c])
		return g->files[c];
	if (!dn_drive_writable(d)) {
		if (atomic_load(&d->state) == DN_DRIVE_FULL)
			atomic_fetch_or(&g->full, 1u << c);
		goto missing;
	}
	err = dn_layout_mkdirs(d->root, w->id);
	if (!err)
		err = dn_layout_path(d->root, w->id, g->idx, c, path, sizeof(path));
	if (!err)
		err = dn_file_open(d, path, c >= w->k, &g->files[c]);
	if (!err) {
		g->created |= 1u << c;
		w->drives_used[d->idx] = 1;
	}
	if (err) {
		ZC_ERR("write", "drive=%u open failed err=%s: cell recorded missing", d->idx,
		       strerror(-err));
		/* A folder that is gone, read-only or full fails every later cell too: mark the
		 * drive failed (as an I/O error on its ring does), so the state metric tells the
		 * operator and new groups avoid it. Our own limits are not the drive's fault. */
		if (err == -ENOSPC || err == -EDQUOT) {
			dn_drive_mark_full(d); /* full is not broken */
			atomic_fetch_or(&g->full, 1u << c);
		} else if (err != -ENOMEM && err != -EMFILE && err != -ENFILE &&
		           err != -ENAMETOOLONG && err != -EINVAL && dn_drive_ok(d)) {
			ZC_ERR("drive", "drive=%u open err=%s: marking failed", d->idx,
			       strerror(-err));
			atomic_store(&d->state, DN_DRIVE_FAILED);
		}
		goto missing;
	}
	return g->files[c];
missing:
	atomic_fetch_or(&g->missing, 1u << c);
	return NULL;
}

/* ---- completions (drive threads) ---- */
static void
io_done(struct dn_io *io)
{
	struct dn_write *w = io->arg;
	struct wgroup *g = io->grp;

	if (io->res < 0 && g) {
		atomic_fetch_or(&g->missing, 1u << io->cell);
		if (io->res == -ENOSPC)
			atomic_fetch_or(&g->full, 1u << io->cell);
	} else if (io->res < 0) {
		/* A folder fsync failed: no cell on that drive is known durable. */
		for (uint32_t gi = 0; gi < w->ngroups; gi++)
			for (unsigned c = 0; c < w->n; c++)
				if (w->groups[gi]->drives[c] == io->cell) {
					atomic_fetch_or(&w->groups[gi]->missing, 1u << c);
					if (io->res == -ENOSPC)
						atomic_fetch_or(&w->groups[gi]->full, 1u << c);
				}
	}
	if (io->op == DN_IO_WRITEV) {
		for (unsigned i = 0; i < io->niov; i++)
			if (io->refs[i])
				zc_ref_put(io->refs[i]);
		dn_credit_give(w->s, io->len);
	} else if (io->op == DN_IO_WRITE_FIXED) {
		dn_pool_put(io->file->drive, io->buf_index);
	}
	if (io->heap)
		free(io);
	else
		dn_io_put(w->s, io);
	/* The group first: its fsyncs must be counted on the write before it can drain. */
	if (g)
		group_unhold(w, g);
	write_unhold(w);
}

static void
submit(struct dn_write *w, struct dn_io *io)
{
	atomic_fetch_add(&w->outstanding, 1);
	if (io->grp)
		atomic_fetch_add(&((struct wgroup *)io->grp)->outstanding, 1);
	dn_drive_submit(io->file->drive, io);
}

/*
 * A file or folder fsync. Not the data path (one small request per file per group, per
 * folder per write), so it is allocated here rather than taken from the pool.
 */
static int
submit_sync(struct dn_write *w, enum dn_io_op op, struct dn_file *file, void *grp, unsigned cell)
{
	struct dn_io *io = calloc(1, sizeof(*io));

	if (!io)
		return -ENOMEM;
	io->op = op;
	io->file = file;
	io->cb = io_done;
	io->arg = w;
	io->grp = grp;
	io->cell = cell;
	io->heap = true;
	submit(w, io);
	return 0;
}

/* ---- data cells ---- */
static void
drop_pending(struct dn_write *w, unsigned c)
{
	struct dn_io *io = w->pending[c];

	if (!io)
		return;
	for (unsigned i = 0; i < io->niov; i++)
		if (io->refs[i])
			zc_ref_put(io->refs[i]);
	dn_credit_give(w->s, io->len);
	dn_io_put(w->s, io);
	w->pending[c] = NULL;
}

static int
flush_cell(struct dn_write *w, unsigned c)
{
	struct dn_io *io = w->pending[c];
	struct wgroup *g;
	struct dn_file *f;

	if (!io)
		return 0; /* also before the first group exists */
	g = w->groups[w->ngroups - 1];
	f = group_file(w, g, c);
	if (!f) {
		drop_pending(w, c);
		return 0;
	}
	w->pending[c] = NULL;
	io->op = DN_IO_WRITEV;
	io->file = f;
	io->off = g->file_off[c];
	io->cb = io_done;
	io->arg = w;
	io->grp = g;
	io->cell = c;
	g->file_off[c] += io->len;
	submit(w, io);
	return 0;
}

static int
add_frag(struct dn_write *w, unsigned c, const uint8_t *p, size_t len, struct zc_ref *ref)
{
	struct dn_io *io = w->pending[c];
	int err;

	if (io && io->niov == DN_IOV_MAX) {
		err = flush_cell(w, c);
		if (err)
			return err;
		io = NULL;
	}
	if (!io) {
		io = dn_io_get(w->s, w->s->o.wait_ns);
		if (!io)
			return -EAGAIN;
		io->niov = 0;
		io->len = 0;
		io->heap = false;
		w->pending[c] = io;
	}
	if (ref)
		zc_ref_get(ref);
	dn_credit_add(w->s, len);
	io->iov[io->niov].iov_base = (void *)p;
	io->iov[io->niov].iov_len = len;
	io->refs[io->niov++] = ref;
	io->len += len;
	return 0;
}

/* ---- stripes ---- */
static int
stripe_open(struct dn_write *w)
{
	uint8_t *par[EC_MAX_CELLS];
	struct wgroup *g;
	int err;

	if (w->stripe == 0) {
		err = group_start(w);
		if (err)
			return err;
	}
	g = w->groups[w->ngroups - 1];
	for (unsigned p = 0; p < w->m; p++) {
		/* Take the buffer from the pool of the drive that will write it. */
		struct dn_drive *d = &w->s->drives[g->drives[w->k + p]];
		int idx = dn_pool_get(d, w->s->o.wait_ns);

		if (idx < 0) {
			for (unsigned q = 0; q < p; q++)
				dn_pool_put(&w->s->drives[w->pdrive[q]], w->pbuf[q]);
			return -EAGAIN;
		}
		w->pbuf[p] = idx;
		w->pdrive[p] = (uint8_t)d->idx;
		par[p] = dn_pool_buf(d, idx);
	}
	ec_stripe_init(&w->st, w->codec, w->cell, par);
	w->stripe_open = true;
	w->dcell = 0;
	w->fill = 0;
	return 0;
}

static void
release_parity(struct dn_write *w)
{
	for (unsigned p = 0; p < w->m; p++)
		dn_pool_put(&w->s->drives[w->pdrive[p]], w->pbuf[p]);
	w->stripe_open = false;
}

/* Flush the data cells, then write parity; the stripe's buffers pass to the ios. */
static int
stripe_close(struct dn_write *w)
{
	struct wgroup *g = w->groups[w->ngroups - 1];
	/* Parity as long as the longest data cell: past it the parity of zero padding is zero,
	 * and the reader pads with zeros (dn_geom_cell_len), so a short stripe stores no more
	 * parity than data. */
	size_t len = ec_stripe_parity_len(&w->st);
	int err = 0;

	for (unsigned c = 0; c < w->k; c++) {
		int e = flush_cell(w, c);

		if (e && !err)
			err = e;
	}
	for (unsigned p = 0; p < w->m; p++) {
		unsigned c = w->k + p;
		struct dn_drive *d = &w->s->drives[w->pdrive[p]];
		uint8_t *buf = dn_pool_buf(d, w->pbuf[p]);
		size_t wlen = len;
		struct dn_file *f;
		struct dn_io *io;

		ec_chunk_crc_add(&g->cc[c], buf, len);
		f = group_file(w, g, c);
		if (f && f->direct && wlen % DN_DIRECT_ALIGN) {
			/* O_DIRECT writes whole blocks: the file system allocates one anyway. */
			wlen += DN_DIRECT_ALIGN - wlen % DN_DIRECT_ALIGN;
			memset(buf + len, 0, wlen - len);
		}
		io = f ? dn_io_get(w->s, w->s->o.wait_ns) : NULL;
		if (!io) {
			if (f && !err)
				err = -EAGAIN;
			dn_pool_put(d, w->pbuf[p]);
			g->file_off[c] += w->cell;
			continue;
		}
		io->op = DN_IO_WRITE_FIXED;
		io->file = f;
		io->off = g->file_off[c];
		io->iov[0].iov_base = buf;
		io->iov[0].iov_len = wlen;
		io->niov = 0;
		io->len = wlen;
		io->buf_index = w->pbuf[p];
		io->cb = io_done;
		io->arg = w;
		io->grp = g;
		io->cell = c;
		io->heap = false;
		g->file_off[c] += w->cell;
		submit(w, io);
	}
	w->stripe_open = false;
	if (++w->stripe == w->spg)
		w->stripe = 0;
	return err;
}

/* ---- public ---- */
/* Durable cells a group of a k+m write needs to commit: --write-quorum, else k + 1. */
static unsigned
write_quorum(const struct dn_store *s, unsigned k, unsigned n)
{
	unsigned quorum = s->o.write_quorum ? s->o.write_quorum : k + 1;

	if (quorum > n)
		quorum = n;
	if (quorum < k)
		quorum = k;
	return quorum;
}

int
dn_write_quorum_check(struct dn_store *s, unsigned k, unsigned m, unsigned *writable,
                      unsigned *ndrives, unsigned *quorum)
{
	unsigned ok = 0, full = 0, q;

	if (k == 0) {
		k = s->o.k;
		m = s->o.m;
	}
	if (m == 0 || k + m > s->ndrives || k + m > EC_MAX_CELLS)
		return -EINVAL;
	q = write_quorum(s, k, k + m);
	for (unsigned d = 0; d < s->ndrives; d++) {
		if (dn_drive_writable(&s->drives[d]))
			ok++;
		else if (atomic_load(&s->drives[d].state) == DN_DRIVE_FULL)
			full++;
	}
	if (writable)
		*writable = ok;
	if (ndrives)
		*ndrives = s->ndrives;
	if (quorum)
		*quorum = q;
	if (ok >= q || s->o.discard)
		return 0;
	return full ? -ENOSPC : DN_ENOQUORUM;
}

int
dn_write_begin(struct dn_store *s, const char *bucket, const char *key, uint64_t size,
               bool size_known, unsigned k, unsigned m, struct dn_write **out)
{
	struct dn_write *w;
	int err;

	if (!bucket || !key || !*key || strlen(key) > 1024)
		return -EINVAL;
	if (k == 0) {
		k = s->o.k;
		m = s->o.m;
	}
	if (m == 0 || k + m > s->ndrives || k + m > EC_MAX_CELLS)
		return -EINVAL;
	err = dn_bucket_head(s, bucket, NULL);
	if (err)
		return err;
	err = dn_write_quorum_check(s, k, m, NULL, NULL, NULL);
	if (err)
		return err;
	err = dn_admission_enter(s);
	if (err)
		return err;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->s = s;
	w->bucket = dn_strdup(bucket);
	w->key = dn_strdup(key);
	w->size = size;
	w->size_known = size_known;
	w->k = k;
	w->m = m;
	w->n = k + m;
	w->cell = (uint32_t)s->o.cell_size;
	w->spg = s->o.stripes_per_group;
	w->chunk = (uint32_t)s->o.chunk_size;
	w->id = dn_meta_next_id(s->meta);
	atomic_init(&w->outstanding, 1);
	atomic_fetch_add(&s->live_writes, 1);
	err = dn_store_codec(s, k, m, &w->codec);
	if (err || !w->bucket || !w->key) {
		atomic_fetch_sub(&s->live_writes, 1);
		free(w->bucket);
		free(w->key);
		free(w);
		return err ? err : -ENOMEM;
	}
	*out = w;
	return 0;
}

/*
 * One pass over the bytes feeds the stripe encode and the chunk CRCs; the CRC of this
 * call (checked against want_crc when given) and of the whole object are derived from
 * the chunk CRCs, not read again.
 */
static int
write_data(struct dn_write *w, uint64_t offset, const struct zc_seg *segs, size_t n,
           const uint32_t *want_crc)
{
	uint64_t total = 0;
	uint32_t call_crc = 0;
	int err;

	if (w->err)
		return w->err;
	if (offset != w->written)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		total += segs[i].len;
	if (w->size_known && total > w->size - w->written)
		return -EINVAL;
	if (w->s->o.discard) {
		/* Check what arrived still: --discard measures transport with its CRC check. */
		for (size_t i = 0; want_crc && i < n; i++)
			call_crc = ec_crc32c(call_crc, segs[i].ptr, segs[i].len);
		if (want_crc && call_crc != *want_crc)
			return -EBADMSG;
		w->written += total;
		return 0;
	}
	if (dn_credit_over(w->s)) {
		/* Submit the partial cells we hold first: waiting on them would never end. */
		for (unsigned c = 0; c < w->k; c++) {
			err = flush_cell(w, c);
			if (err)
				goto poison;
		}
		err = dn_credit_wait(w->s);
		if (err)
			goto poison;
	}
	for (size_t i = 0; i < n; i++) {
		const uint8_t *p = segs[i].ptr;
		size_t len = segs[i].len;

		while (len > 0) {
			struct wgroup *g;
			size_t take;

			if (!w->stripe_open) {
				err = stripe_open(w);
				if (err)
					goto poison;
			}
			g = w->groups[w->ngroups - 1];
			take = w->cell - w->fill < len ? w->cell - w->fill : len;
			ec_stripe_add(&w->st, w->dcell, p, take);
			err = ec_chunk_crc_add_chain(&g->cc[w->dcell], p, take, &call_crc);
			if (err)
				goto poison;
			err = add_frag(w, w->dcell, p, take, segs[i].ref);
			if (err)
				goto poison;
			w->fill += (uint32_t)take;
			w->written += take;
			p += take;
			len -= take;
			if (w->fill == w->cell) {
				err = flush_cell(w, w->dcell);
				if (err)
					goto poison;
				w->fill = 0;
				if (++w->dcell == w->k) {
					err = stripe_close(w);
					if (err)
						goto poison;
				}
			}
		}
	}
	if (want_crc && call_crc != *want_crc) {
		err = -EBADMSG;
		goto poison;
	}
	w->crc = ec_crc32c_combine(w->crc, call_crc, total);
	return 0;
poison:
	w->err = err;
	return err;
}

int
dn_write_data(struct dn_write *w, uint64_t offset, const struct zc_seg *segs, size_t n)
{
	return write_data(w, offset, segs, n, NULL);
}

int
dn_write_data_checked(struct dn_write *w, uint64_t offset, const struct zc_seg *segs, size_t n,
                      uint32_t crc32c)
{
	return write_data(w, offset, segs, n, &crc32c);
}

/* ---- finishing ---- */
static void
unlink_files(struct dn_write *w)
{
	char path[PATH_MAX];

	for (uint32_t gi = 0; gi < w->ngroups; gi++) {
		struct wgroup *g = w->groups[gi];

		for (unsigned c = 0; c < w->n; c++) {
			if (!(g->created & (1u << c)))
				continue;
			if (!dn_layout_path(w->s->drives[g->drives[c]].root, w->id, gi, c, path,
			                    sizeof(path)))
				unlink(path);
		}
	}
}

static void
write_free(struct dn_write *w)
{
	struct dn_store *s = w->s;

	for (unsigned d = 0; d < DN_MAX_DRIVES; d++)
		dn_file_close(w->dirs[d]);
	for (uint32_t gi = 0; gi < w->ngroups; gi++) {
		struct wgroup *g = w->groups[gi];

		for (unsigned c = 0; c < w->n; c++) {
			dn_file_close(g->files[c]);
			free(g->crcs[c]);
		}
		free(g);
	}
	free(w->groups);
	for (size_t i = 0; i < w->nattrs; i++) {
		free(w->attrs[i].name);
		free(w->attrs[i].value);
	}
	free(w->attrs);
	free((char *)w->cond.if_match);
	free(w->etag);
	free(w->bucket);
	free(w->key);
	free(w);
	atomic_fetch_sub(&s->live_writes, 1);
}

/*
 * Build the extent record from what was written; when a group missed quorum: -ENOSPC if
 * a full drive cost it cells (space may come back), else DN_ENOQUORUM (not -EIO: that is
 * the metadata's I/O error, reported differently).
 */
static int
build_extent(struct dn_write *w, struct dn_extent *e)
{
	unsigned quorum = write_quorum(w->s, w->k, w->n);
	int err;

	memset(e, 0, sizeof(*e));
	e->id = w->id;
	e->g = (struct dn_geom){ w->written, w->k, w->m, w->cell, w->spg, w->chunk, true };
	err = dn_extent_alloc(e);
	if (err)
		return err;
	if (e->ngroups != w->ngroups) {
		dn_extent_free(e);
		return -EIO;
	}
	for (uint32_t gi = 0; gi < e->ngroups; gi++) {
		struct wgroup *g = w->groups[gi];
		uint32_t missing = atomic_load(&g->missing);

		if (w->n - (unsigned)__builtin_popcount(missing) < quorum) {
			uint32_t full = atomic_load(&g->full) & missing;

			ZC_ERR("write", "id=%llx group=%u missing=%#x full=%#x below quorum=%u",
			       (unsigned long long)w->id, gi, missing, full, quorum);
			dn_extent_free(e);
			return full ? -ENOSPC : DN_ENOQUORUM;
		}
		memcpy(e->groups[gi].drives, g->drives, w->n);
		e->groups[gi].missing = missing;
		for (unsigned c = 0; c < w->n; c++) {
			int cnt = ec_chunk_crc_finish(&g->cc[c]);
			size_t want = dn_extent_ncrc(e, gi, c);

			if (cnt < 0 || (size_t)cnt != want) {
				dn_extent_free(e);
				return -EIO;
			}
			memcpy(dn_extent_crcs(e, gi, c), g->crcs[c], want * sizeof(uint32_t));
		}
	}
	return 0;
}

/* A write committed at quorum with cells missing: wake the healer for the rest. */
static void
note_missing(struct dn_store *s, const struct dn_extent *e)
{
	for (uint32_t gi = 0; gi < e->ngroups; gi++)
		if (e->groups[gi].missing) {
			dn_heal_note(s);
			return;
		}
}

/* --discard: nothing was stored or committed; answer as a commit would. */
static void
finish_discard(struct dn_write *w)
{
	struct dn_write_result res = { w->written, w->crc, w->etag, 0 };
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	res.mtime_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	w->cb(w->cb_arg, 0, &res);
	write_free(w);
}

/* fsync the folder holding this write's new files on drive d, once per drive. */
static void
sync_dir(struct dn_write *w, unsigned d)
{
	struct dn_drive *dr = &w->s->drives[d];
	char path[PATH_MAX];

	if (w->dirs[d])
		return;
	snprintf(path, sizeof(path), "%s/data/%02x", dr->root, (unsigned)(w->id & 0xff));
	if (dn_dir_open(dr, path, &w->dirs[d]) < 0) {
		ZC_ERR("write", "drive=%u cannot open %s for fsync", d, path);
		w->dirs[d] = NULL;
		return; /* the cells' own fdatasync still runs; quorum counts them */
	}
	if (submit_sync(w, DN_IO_FSYNC_DIR, w->dirs[d], NULL, d) < 0)
		ZC_ERR("write", "drive=%u no memory to fsync %s", d, path);
}

static void
start_sync(struct dn_write *w)
{
	w->phase = PH_SYNC;
	atomic_store(&w->outstanding, 1);
	/* Every group has synced and closed its files by now; their names remain. */
	for (unsigned d = 0; d < w->s->ndrives; d++)
		if (w->drives_used[d])
			sync_dir(w, d);
	write_unhold(w);
}

/* Terminal work runs on the commit thread: LMDB syncs and unlinks stay off the rings. */
static void
finish_job(struct dn_job *job)
{
	struct dn_write *w = (struct dn_write *)((char *)job - offsetof(struct dn_write, job));

	if (w->aborted) {
		unlink_files(w);
		write_free(w);
	} else if (w->err) {
		int err = w->err;

		unlink_files(w);
		w->cb(w->cb_arg, err, NULL);
		write_free(w);
	} else {
		/* Stored writes commit in commit_batch: only --discard ends here. */
		assert(w->s->o.discard);
		finish_discard(w);
	}
}

/* Commit a run of finished writes with one metadata transaction (one sync per replica). */
static void
commit_batch(struct dn_job **jobs, size_t n)
{
	struct dn_meta_put puts[DN_BATCH_MAX];
	struct dn_extent ext[DN_BATCH_MAX];
	struct dn_piece piece[DN_BATCH_MAX];
	struct dn_obj obj[DN_BATCH_MAX];
	struct dn_write *ws[DN_BATCH_MAX];
	struct dn_store *s = NULL;
	struct timespec ts;
	uint64_t now;
	size_t np = 0;

	clock_gettime(CLOCK_REALTIME, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	for (size_t i = 0; i < n; i++) {
		struct dn_write *w =
		        (struct dn_write *)((char *)jobs[i] - offsetof(struct dn_write, job));
		int err;

		s = w->s;
		if (w->aborted || w->err || s->o.discard) {
			finish_job(jobs[i]);
			continue;
		}
		memset(&ext[np], 0, sizeof(ext[np]));
		if (w->written > 0) {
			err = build_extent(w, &ext[np]);
			if (err) {
				unlink_files(w);
				w->cb(w->cb_arg, err, NULL);
				write_free(w);
				continue;
			}
		}
		piece[np] = (struct dn_piece){ w->id, w->written };
		obj[np] = (struct dn_obj){ .size = w->written,
			                   .mtime_ns = now,
			                   .crc32c = w->crc,
			                   .k = w->k,
			                   .m = w->m,
			                   .etag = w->etag,
			                   .attrs = w->attrs,
			                   .nattrs = w->nattrs,
			                   .pieces = w->written ? &piece[np] : NULL,
			                   .npieces = w->written ? 1 : 0 };
		puts[np] = (struct dn_meta_put){ .bucket = w->bucket,
			                         .key = w->key,
			                         .o = &obj[np],
			                         .e = w->written ? &ext[np] : NULL,
			                         .cond = w->has_cond ? &w->cond : NULL };
		ws[np++] = w;
	}
	if (np)
		dn_meta_put_batch(s->meta, puts, np);
	for (size_t i = 0; i < np; i++) {
		struct dn_write *w = ws[i];
		struct dn_write_result res = { w->written, w->crc, w->etag, now };

		if (!puts[i].err)
			note_missing(s, &ext[i]);
		dn_extent_free(&ext[i]);
		if (puts[i].err) {
			unlink_files(w);
			w->cb(w->cb_arg, puts[i].err, NULL);
			write_free(w);
			continue;
		}
		atomic_fetch_add(&s->objects_committed, 1);
		/* The old version's files go only now that the new one is visible. */
		for (size_t j = 0; j < puts[i].nfreed; j++) {
			dn_extent_unlink(s, &puts[i].freed[j]);
			dn_extent_free(&puts[i].freed[j]);
		}
		free(puts[i].freed);
		w->cb(w->cb_arg, 0, &res);
		write_free(w);
	}
}

static void
write_unhold(struct dn_write *w)
{
	if (atomic_fetch_sub(&w->outstanding, 1) != 1)
		return;
	if (!w->aborted && w->phase == PH_WRITE && w->err == 0 && !w->s->o.discard) {
		start_sync(w);
		return;
	}
	w->job.fn = finish_job;
	w->job.batch = commit_batch;
	dn_store_defer(w->s, &w->job);
}

/* Nothing of w will commit: drop the cells and parity it still holds; its ios drain. */
static void
write_doom(struct dn_write *w)
{
	atomic_store(&w->doomed, true);
	for (unsigned c = 0; c < w->k; c++)
		drop_pending(w, c);
	if (w->stripe_open)
		release_parity(w);
}

void
dn_write_commit(struct dn_write *w, const char *etag, const struct dn_attr *attrs, size_t nattrs,
                dn_commit_cb cb, void *arg)
{
	dn_write_commit_if(w, etag, attrs, nattrs, NULL, cb, arg);
}

void
dn_write_commit_if(struct dn_write *w, const char *etag, const struct dn_attr *attrs, size_t nattrs,
                   const struct dn_cond *cond, dn_commit_cb cb, void *arg)
{
	if (cond && (cond->if_none_match || (cond->if_match && cond->if_match[0]))) {
		w->has_cond = true;
		w->cond.if_none_match = cond->if_none_match;
		if (cond->if_match && cond->if_match[0]) {
			w->cond.if_match = dn_strdup(cond->if_match);
			if (!w->cond.if_match && !w->err)
				w->err = -ENOMEM;
		}
	}
	w->cb = cb;
	w->cb_arg = arg;
	w->etag = dn_strdup(etag ? etag : "");
	if (nattrs) {
		w->attrs = calloc(nattrs, sizeof(*w->attrs));
		if (w->attrs)
			for (; w->nattrs < nattrs; w->nattrs++) {
				w->attrs[w->nattrs].name = dn_strdup(attrs[w->nattrs].name);
				w->attrs[w->nattrs].value = dn_strdup(attrs[w->nattrs].value);
			}
	}
	if (!w->err && (!w->etag || w->nattrs != nattrs))
		w->err = -ENOMEM;
	if (!w->err && w->size_known && w->written != w->size)
		w->err = -EINVAL;
	if (!w->err && w->stripe_open) {
		/* The last, short stripe: unfilled cells count as zeros for parity. */
		int err = stripe_close(w);

		if (err)
			w->err = err;
	}
	if (w->err)
		write_doom(w);
	release_group(w);
	write_unhold(w);
}

void
dn_write_abort(struct dn_write *w)
{
	if (!w)
		return;
	w->aborted = true;
	write_doom(w);
	release_group(w);
	write_unhold(w);
}
