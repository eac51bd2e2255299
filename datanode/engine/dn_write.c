/*
 * The write pipeline: segments are fed to the streaming encoder where they lie and each
 * data cell's fragments become one WRITEV (up to DN_IOV_MAX iovecs) as soon as the cell is
 * full; parity cells go out as WRITE_FIXED from registered pool buffers once a stripe is
 * complete. Every io holds one zc_ref per segment it writes; its completion puts them.
 *
 * With data_direct the data cells go the parity's way instead: each cell's bytes are copied
 * once (counted as align_copied) into a registered pool buffer of the drive that will write
 * it, and the full cell goes out WRITE_FIXED to an O_DIRECT file, so the kernel neither
 * copies it into the page cache nor writes it back later. O_DIRECT writes whole blocks: a
 * cell that ends a file short of one is zero-padded to DN_DIRECT_ALIGN, and the file is cut
 * back to its true length before its fdatasync, so files and CRCs are the same in both
 * modes and either mode reads what the other wrote.
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

#include "dn_write_internal.h"

static void submit(struct dn_write *w, struct dn_io *io);
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
			if (!g->files[c] || (atomic_load(&g->missing) & (1u << c)) ||
			    (g->dsynced & (1u << c)))
				continue; /* gone, or durable since its one write completed */
			/* Every write of the group is done: cut the padding of a direct tail (one
			 * metadata call per short file; the fdatasync below makes the size
			 * durable). */
			if ((g->padded & (1u << c)) &&
			    ftruncate(g->files[c]->fd, (off_t)g->file_off[c]) < 0) {
				ZC_ERR("write", "ftruncate cell=%u err=%s: cell recorded missing",
				       c, strerror(errno));
				atomic_fetch_or(&g->missing, 1u << c);
				continue;
			}
			if (dn_write_submit_sync(w, DN_IO_FSYNC, g->files[c], g, c) < 0)
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

void
dn_write_release_group(struct dn_write *w)
{
	if (w->group_held) {
		w->group_held = false;
		group_unhold(w, w->groups[w->ngroups - 1]);
	}
}

/* ---- group setup ---- */
_Static_assert(EC_MAX_CELLS <= sizeof(((struct dn_claim *)0)->place), "dn_claim.place");

/* ---- the write quorum ---- */
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
	q = dn_store_quorum(s, k, k + m);
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
	return full ? -ENOSPC : ZC_E(ZC_NO_QUORUM);
}

static int
group_start(struct dn_write *w)
{
	struct dn_store *s = w->s;
	struct wgroup *g, **ng;
	uint32_t missing = 0, full = 0;
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
	dn_write_release_group(w);
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->idx = w->ngroups;
	atomic_init(&g->outstanding, 1);
	if (w->claim.placed && w->ngroups == 0) {
		/* Admission reserved buffers on these drives: keep them, whatever changed. */
		memcpy(g->drives, w->claim.place, w->n);
		for (unsigned c = 0; c < w->n; c++) {
			struct dn_drive *d = &s->drives[g->drives[c]];

			if (dn_drive_writable(d))
				continue;
			missing |= 1u << c;
			if (atomic_load(&d->state) == DN_DRIVE_FULL)
				full |= 1u << c;
		}
	} else {
		dn_store_place(s, atomic_fetch_add(&s->next_base, 1), w->n, g->drives, &missing,
		               &full);
	}
	atomic_store(&g->missing, missing);
	atomic_store(&g->full, full);
	for (unsigned c = 0; c < w->n; c++) {
		g->crcs[c] = malloc(ncrc * sizeof(uint32_t));
		if (!g->crcs[c]) {
			err = -ENOMEM;
			goto free_g;
		}
		zc_chunk_crc_init(&g->cc[c], w->chunk, g->crcs[c], ncrc);
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
		err = dn_file_open(d, path, c >= w->k || w->s->o.data_direct, &g->files[c]);
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
		dn_iov_release(w->s, io);
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
	dn_write_unhold(w);
}

static void
submit(struct dn_write *w, struct dn_io *io)
{
	atomic_fetch_add(&w->outstanding, 1);
	if (io->grp)
		atomic_fetch_add(&((struct wgroup *)io->grp)->outstanding, 1);
	dn_drive_submit(io->file->drive, io);
}

/* A file or folder fsync; grp: the block group it counts in (a file's), or NULL. */
int
dn_write_submit_sync(struct dn_write *w, enum dn_io_op op, struct dn_file *file, void *grp,
                     unsigned cell)
{
	struct dn_io *io = dn_io_create_sync(file, op, io_done, w);

	if (!io)
		return -ENOMEM;
	io->grp = grp;
	io->cell = cell;
	submit(w, io);
	return 0;
}

/*
 * Is this write of cell c the only one its file gets? Then it carries its own sync
 * (RWF_DSYNC: data and the metadata to read it back, as write + fdatasync), and the file
 * needs no separate fdatasync: one request and one trip through the ring instead of two.
 * That is every cell of an object smaller than a stripe, whose cells all go out when the
 * write commits. A file written in several writes keeps its fdatasync: a write's own sync
 * covers only its range, and the file's other writes may still be in flight.
 */
static void
mark_only_write(struct dn_write *w, struct wgroup *g, unsigned c, struct dn_io *io)
{
	if (!w->closing || g->file_off[c] != 0)
		return;
	io->dsync = true;
	g->dsynced |= 1u << c;
}

/* ---- data cells ---- */
void
dn_write_drop_pending(struct dn_write *w, unsigned c)
{
	struct dn_io *io = w->pending[c];

	if (w->dbuf[c] >= 0) {
		/* A direct cell being filled: its buffer is of the current group's drive. */
		dn_pool_put(&w->s->drives[w->groups[w->ngroups - 1]->drives[c]], w->dbuf[c]);
		w->dbuf[c] = -1;
	}
	if (!io)
		return;
	dn_iov_release(w->s, io);
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
		dn_write_drop_pending(w, c);
		return 0;
	}
	w->pending[c] = NULL;
	io->op = DN_IO_WRITEV;
	io->file = f;
	io->off = g->file_off[c];
	mark_only_write(w, g, c, io);
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
		io = dn_iov_start(w->s);
		if (!io)
			return -EAGAIN;
		w->pending[c] = io;
	}
	dn_iov_add(w->s, io, p, len, ref);
	return 0;
}

/* data_direct: copy a fragment of data cell c into its pool buffer, taken on first use. */
static int
copy_frag(struct dn_write *w, unsigned c, const uint8_t *p, size_t len)
{
	struct wgroup *g = w->groups[w->ngroups - 1];
	struct dn_drive *d = &w->s->drives[g->drives[c]];

	if (atomic_load(&g->missing) & (1u << c))
		return 0; /* nothing will be written there: no buffer, no copy */
	if (w->dbuf[c] < 0) {
		int idx = dn_pool_get(d, w->s->o.wait_ns);

		if (idx < 0)
			return -EAGAIN; /* the drive's writes hold every buffer: back off */
		w->dbuf[c] = idx;
	}
	memcpy(dn_pool_buf(d, w->dbuf[c]) + w->fill, p, len);
	atomic_fetch_add_explicit(&w->s->align_copied, len, memory_order_relaxed);
	return 0;
}

/* data_direct: write the len bytes of data cell c's buffer; the io owns it from here. */
static int
flush_direct(struct dn_write *w, unsigned c, size_t len)
{
	struct wgroup *g = w->groups[w->ngroups - 1];
	struct dn_drive *d = &w->s->drives[g->drives[c]];
	int idx = w->dbuf[c];
	size_t wlen = len;
	struct dn_file *f;
	struct dn_io *io;

	if (idx < 0)
		return 0;
	w->dbuf[c] = -1;
	f = group_file(w, g, c);
	io = f ? dn_io_get(w->s, w->s->o.wait_ns) : NULL;
	if (!io) {
		dn_pool_put(d, idx);
		g->file_off[c] += len;
		return f ? -EAGAIN : 0;
	}
	if (wlen % DN_DIRECT_ALIGN) {
		/* Only a file's last cell can be short (cells are whole blocks). */
		wlen += DN_DIRECT_ALIGN - wlen % DN_DIRECT_ALIGN;
		memset(dn_pool_buf(d, idx) + len, 0, wlen - len);
		g->padded |= 1u << c; /* cut back, then fdatasynced: never its own sync */
	} else {
		mark_only_write(w, g, c, io);
	}
	io->op = DN_IO_WRITE_FIXED;
	io->file = f;
	io->off = g->file_off[c];
	io->iov[0].iov_base = dn_pool_buf(d, idx);
	io->iov[0].iov_len = wlen;
	io->niov = 0;
	io->len = wlen;
	io->buf_index = idx;
	io->cb = io_done;
	io->arg = w;
	io->grp = g;
	io->cell = c;
	io->heap = false;
	g->file_off[c] += len;
	submit(w, io);
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

void
dn_write_release_parity(struct dn_write *w)
{
	for (unsigned p = 0; p < w->m; p++)
		dn_pool_put(&w->s->drives[w->pdrive[p]], w->pbuf[p]);
	w->stripe_open = false;
}

/* Flush the data cells, then write parity; the stripe's buffers pass to the ios. */
int
dn_write_stripe_close(struct dn_write *w)
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
	if (w->dcell < w->k) {
		/* The last, short stripe (direct): its partial cell; later ones are empty. */
		int e = flush_direct(w, w->dcell, w->fill);

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

		zc_chunk_crc_add(&g->cc[c], buf, len);
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
		mark_only_write(w, g, c, io);
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
static int
write_begin(struct dn_store *s, const char *bucket, const char *key, uint64_t size, bool size_known,
            unsigned k, unsigned m, struct dn_admit *adm, bool admit, struct dn_write **out)
{
	struct dn_admit local = { 0 };
	struct dn_write *w;
	int err;

	if (!bucket || !key || !*key || strlen(key) > 1024) {
		err = -EINVAL;
		goto unclaim;
	}
	if (k == 0) {
		k = s->o.k;
		m = s->o.m;
	}
	if (m == 0 || k + m > s->ndrives || k + m > EC_MAX_CELLS) {
		err = -EINVAL;
		goto unclaim;
	}
	err = dn_bucket_head(s, bucket, NULL);
	if (!err)
		err = dn_write_quorum_check(s, k, m, NULL, NULL, NULL);
	if (err)
		goto unclaim;
	if (admit) {
		adm = &local;
		dn_admit_bufs(adm, k, m, size, size_known);
		err = dn_admission_enter(s, adm);
		if (err)
			return err;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		err = -ENOMEM;
		goto unclaim;
	}
	if (adm) {
		w->claim = adm->claim; /* ours now: released when the write has drained */
		adm->claim = (struct dn_claim){ 0 };
	}
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
	for (unsigned c = 0; c < EC_MAX_CELLS; c++)
		w->dbuf[c] = -1;
	atomic_init(&w->outstanding, 1);
	dn_store_live_get(s);
	err = dn_store_codec(s, k, m, &w->codec);
	if (err || !w->bucket || !w->key) {
		dn_store_live_put(s);
		dn_write_unclaim(w);
		free(w->bucket);
		free(w->key);
		free(w);
		return err ? err : -ENOMEM;
	}
	*out = w;
	return 0;
unclaim:
	if (adm)
		dn_admission_release(s, &adm->claim);
	return err;
}

int
dn_write_begin(struct dn_store *s, const char *bucket, const char *key, uint64_t size,
               bool size_known, unsigned k, unsigned m, struct dn_write **out)
{
	return write_begin(s, bucket, key, size, size_known, k, m, NULL, true, out);
}

int
dn_write_begin_admitted(struct dn_store *s, struct dn_admit *adm, const char *bucket,
                        const char *key, uint64_t size, bool size_known, unsigned k, unsigned m,
                        struct dn_write **out)
{
	return write_begin(s, bucket, key, size, size_known, k, m, adm, false, out);
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
			call_crc = zc_crc32c(call_crc, segs[i].ptr, segs[i].len);
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
			err = zc_chunk_crc_add_chain(&g->cc[w->dcell], p, take, &call_crc);
			if (err)
				goto poison;
			if (w->s->o.data_direct)
				err = copy_frag(w, w->dcell, p, take);
			else
				err = add_frag(w, w->dcell, p, take, segs[i].ref);
			if (err)
				goto poison;
			w->fill += (uint32_t)take;
			w->written += take;
			p += take;
			len -= take;
			if (w->fill == w->cell) {
				err = w->s->o.data_direct ? flush_direct(w, w->dcell, w->cell)
				                          : flush_cell(w, w->dcell);
				if (err)
					goto poison;
				w->fill = 0;
				if (++w->dcell == w->k) {
					err = dn_write_stripe_close(w);
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
	w->crc = zc_crc32c_combine(w->crc, call_crc, total);
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
