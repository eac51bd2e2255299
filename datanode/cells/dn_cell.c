/*
 * The cell store (cluster mode): writes of single cells, their commit, delete and the
 * collector's list; reads are in dn_cell_read.c, the table in dn_meta_cell.c.
 *
 * A cell write is the object write path cut down to one file: segments go to the drive's
 * ring as WRITEV SQEs where they lie (each iovec holds a zc_ref until its completion), the
 * chunk CRCs are folded in the same pass, and the file's io uses the store's io pool, its
 * in-flight credit and the drive thread of dn_drive.c. Completion order as in dn_write.c:
 * the writer holds a bias of 1 on `outstanding`, every io adds one; when the writes drain,
 * the file is fdatasynced and its folder fsynced (both SQEs at once); when those drain,
 * the commit thread records the entry as pending, a batch of cells in one transaction.
 *
 * A cell being written is in the store's busy list from open until its entry is recorded
 * (or it failed), so two writers of one name cannot both create its file: with the
 * entries, that makes ZC_E(ZC_CELL_EXISTS) exact.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "dn_cells.h"
#include "zc.h"
#include "zc_crc.h"

struct dn_cells {
	pthread_mutex_t lock;
	struct dn_cell_write *busy;
	/* dn_cell_lost's hook (the cluster healer), under its own lock */
	pthread_mutex_t lost_lock;
	dn_cell_lost_fn lost_fn;
	void *lost_arg;
	atomic_uint_fast64_t n_retired; /* dn_cell_retire's retirements since open */
};

enum cw_phase { CW_WRITE, CW_SYNC };

struct dn_cell_write {
	struct dn_store *s;
	struct dn_cell_id id;
	struct dn_cell_rec rec;
	struct dn_drive *d;
	struct dn_file *file, *dir;
	char path[PATH_MAX];
	struct zc_chunk_crc cc;
	uint64_t written;   /* bytes taken from the caller */
	uint64_t file_off;  /* bytes handed to SQEs */
	struct dn_io *pend; /* fragments not yet submitted */
	atomic_long outstanding;
	atomic_int ioerr; /* first error of a completion */
	int err;          /* first error of the writer */
	enum cw_phase phase;
	dn_cell_cb cb;
	void *cb_arg;
	struct dn_job job;
	struct dn_cell_write *next_busy;
};

static bool
same_id(struct dn_cell_id a, struct dn_cell_id b)
{
	return a.extent == b.extent && a.group == b.group && a.cell == b.cell;
}

int
dn_cells_init(struct dn_store *s)
{
	s->cells = calloc(1, sizeof(*s->cells));
	if (!s->cells)
		return -ENOMEM;
	pthread_mutex_init(&s->cells->lock, NULL);
	pthread_mutex_init(&s->cells->lost_lock, NULL);
	return 0;
}

void
dn_cells_fini(struct dn_store *s)
{
	if (!s->cells)
		return;
	pthread_mutex_destroy(&s->cells->lock);
	pthread_mutex_destroy(&s->cells->lost_lock);
	free(s->cells);
	s->cells = NULL;
}

#define EMPTIED_PAGE 256 /* cell entries listed at a time */

int
dn_cells_drive_emptied(struct dn_store *s, unsigned drive)
{
	struct dn_cell_id after = { 0 };
	uint64_t dropped = 0;
	bool first = true;
	size_t n;

	do {
		struct dn_cell_info *v;
		int err = dn_cell_list(s, first ? NULL : &after, EMPTIED_PAGE, &v, &n);

		if (err)
			return err;
		for (size_t i = 0; i < n && err >= 0; i++) {
			uint32_t d = UINT32_MAX;

			if (v[i].drive != drive)
				continue;
			err = dn_meta_cell_del(s->meta, v[i].id, &d);
			dropped += err == 1;
		}
		if (n)
			after = v[n - 1].id;
		dn_cell_list_free(v, n);
		if (err < 0)
			return err;
		first = false;
	} while (n == EMPTIED_PAGE);
	ZC_WARN("cell", "drive=%u came back empty: %llu cell entries dropped (their cells are "
	        "rebuilt from the other nodes)", drive, (unsigned long long)dropped);
	return 0;
}

/* Claim the name for w: -EBUSY while another write (or an abort) holds it. */
static int
busy_add(struct dn_store *s, struct dn_cell_write *w)
{
	int err = 0;

	pthread_mutex_lock(&s->cells->lock);
	for (struct dn_cell_write *o = s->cells->busy; o; o = o->next_busy)
		if (same_id(o->id, w->id))
			err = -EBUSY;
	if (!err) {
		w->next_busy = s->cells->busy;
		s->cells->busy = w;
	}
	pthread_mutex_unlock(&s->cells->lock);
	return err;
}

static void
busy_del(struct dn_store *s, struct dn_cell_write *w)
{
	pthread_mutex_lock(&s->cells->lock);
	for (struct dn_cell_write **p = &s->cells->busy; *p; p = &(*p)->next_busy)
		if (*p == w) {
			*p = w->next_busy;
			break;
		}
	pthread_mutex_unlock(&s->cells->lock);
}

int
dn_cell_file_named(struct dn_store *s, unsigned drive, const char *name)
{
	struct dn_cell_rec rec;
	struct dn_cell_id id;
	char tail;
	int err;

	if (sscanf(name, "%16" SCNx64 ".%" SCNu32 ".%u%c", &id.extent, &id.group, &id.cell,
	           &tail) != 3)
		return 0;
	err = dn_meta_cell_get(s->meta, id, &rec);
	if (zc_err_is(err, ZC_NO_KEY))
		return 0;
	if (err)
		return err;
	err = rec.drive == drive;
	dn_cell_rec_fini(&rec);
	return err;
}

/* ---- choosing a drive ---- */
static uint64_t
id_hash(struct dn_cell_id id)
{
	uint64_t h = id.extent ^ ((uint64_t)id.group << 32 | id.cell);

	/* splitmix64's finalizer: neighbouring cells land on unrelated drives */
	h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
	h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
	return h ^ (h >> 31);
}

/*
 * The writable drive with most room for length bytes above the reserve (cell_reserve).
 * Drives within 1/64 (plus 64 MiB) of the best count as tied, and the name's hash picks
 * among them: drives on one file system (tests) or equally full ones share the cells
 * instead of one taking all.
 */
static int
pick_drive(struct dn_store *s, struct dn_cell_id id, uint64_t length, unsigned *out)
{
	uint64_t avail[DN_MAX_DRIVES], best = 0;
	bool ok[DN_MAX_DRIVES] = { false }, any_full = false;
	unsigned nties = 0, pick;

	for (unsigned d = 0; d < s->ndrives; d++) {
		struct statvfs sv;

		if (!dn_drive_writable(&s->drives[d])) {
			any_full |= atomic_load(&s->drives[d].state) == DN_DRIVE_FULL;
			continue;
		}
		if (statvfs(s->drives[d].root, &sv) < 0)
			continue;
		avail[d] = (uint64_t)sv.f_bavail * sv.f_frsize;
		if (avail[d] < length + s->o.cell_reserve) {
			any_full = true;
			continue;
		}
		ok[d] = true;
		if (avail[d] > best)
			best = avail[d];
	}
	for (unsigned d = 0; d < s->ndrives; d++)
		if (ok[d] && avail[d] + best / 64 + (64ull << 20) >= best)
			nties++;
	if (nties == 0)
		return any_full ? -ENOSPC : ZC_E(ZC_NO_QUORUM);
	pick = (unsigned)(id_hash(id) % nties);
	for (unsigned d = 0; d < s->ndrives; d++)
		if (ok[d] && avail[d] + best / 64 + (64ull << 20) >= best && pick-- == 0) {
			*out = d;
			break;
		}
	return 0;
}

/* ---- completions (drive threads) ---- */
static void record_one(struct dn_job *job);
static void record_batch(struct dn_job **jobs, size_t n);
static void fail_one(struct dn_job *job);
static int submit_sync(struct dn_cell_write *w, enum dn_io_op op, struct dn_file *f);

static void
set_ioerr(struct dn_cell_write *w, int err)
{
	int none = 0;

	atomic_compare_exchange_strong(&w->ioerr, &none, err);
}

/* Drop one count; the last one moves the write on: sync, then record (or fail). */
static void
unhold(struct dn_cell_write *w)
{
	if (atomic_fetch_sub(&w->outstanding, 1) != 1)
		return;
	if (w->err || atomic_load(&w->ioerr)) {
		w->job.fn = fail_one;
		w->job.batch = NULL;
		dn_store_defer(w->s, &w->job);
		return;
	}
	if (w->phase == CW_WRITE) {
		w->phase = CW_SYNC;
		atomic_store(&w->outstanding, 1);
		if (submit_sync(w, DN_IO_FSYNC, w->file) < 0 ||
		    submit_sync(w, DN_IO_FSYNC_DIR, w->dir) < 0)
			set_ioerr(w, -ENOMEM);
		unhold(w);
		return;
	}
	w->job.fn = record_one;
	w->job.batch = record_batch;
	dn_store_defer(w->s, &w->job);
}

static void
io_done(struct dn_io *io)
{
	struct dn_cell_write *w = io->arg;

	if (io->res < 0)
		set_ioerr(w, io->res);
	if (io->heap) {
		free(io);
	} else {
		dn_iov_release(w->s, io);
		dn_io_put(w->s, io);
	}
	unhold(w);
}

/* An fdatasync or folder fsync: two small requests per cell. */
static int
submit_sync(struct dn_cell_write *w, enum dn_io_op op, struct dn_file *f)
{
	struct dn_io *io = dn_io_create_sync(f, op, io_done, w);

	if (!io)
		return -ENOMEM;
	atomic_fetch_add(&w->outstanding, 1);
	dn_drive_submit(f->drive, io);
	return 0;
}

static void
flush(struct dn_cell_write *w)
{
	struct dn_io *io = w->pend;

	if (!io)
		return;
	w->pend = NULL;
	io->op = DN_IO_WRITEV;
	io->file = w->file;
	io->off = w->file_off;
	io->cb = io_done;
	io->arg = w;
	io->grp = NULL;
	w->file_off += io->len;
	atomic_fetch_add(&w->outstanding, 1);
	dn_drive_submit(w->d, io);
}

static void
drop_pending(struct dn_cell_write *w)
{
	struct dn_io *io = w->pend;

	if (!io)
		return;
	dn_iov_release(w->s, io);
	dn_io_put(w->s, io);
	w->pend = NULL;
}

/* ---- the commit thread ---- */
static struct dn_cell_write *
cw_of(struct dn_job *job)
{
	return (struct dn_cell_write *)((char *)job - offsetof(struct dn_cell_write, job));
}

static void
cw_free(struct dn_cell_write *w, int err)
{
	struct dn_store *s = w->s;

	dn_file_close(w->file);
	dn_file_close(w->dir);
	if (err && unlink(w->path) == 0)
		atomic_fetch_add(&s->cells_swept_failed, 1);
	busy_del(s, w);
	if (w->cb)
		w->cb(w->cb_arg, err);
	dn_cell_rec_fini(&w->rec);
	free(w);
	dn_store_live_put(s);
}

static void
fail_one(struct dn_job *job)
{
	struct dn_cell_write *w = cw_of(job);
	int err = w->err ? w->err : atomic_load(&w->ioerr);

	if (w->cb)
		ZC_WARN("cell", "id=%016" PRIx64 ".%" PRIu32 ".%u drive=%u write failed err=%s",
		        w->id.extent, w->id.group, w->id.cell, w->d->idx, strerror(-err));
	cw_free(w, err);
}

static void
record_batch(struct dn_job **jobs, size_t n)
{
	struct dn_meta_cell_put v[DN_BATCH_MAX];
	struct timespec ts;
	uint64_t now;
	int err;

	clock_gettime(CLOCK_REALTIME, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	for (size_t i = 0; i < n; i++) {
		struct dn_cell_write *w = cw_of(jobs[i]);

		w->rec.created_ns = now;
		v[i] = (struct dn_meta_cell_put){ w->id, &w->rec, 0 };
	}
	err = dn_meta_cell_put_batch(cw_of(jobs[0])->s->meta, v, n);
	for (size_t i = 0; i < n; i++) {
		struct dn_cell_write *w = cw_of(jobs[i]);
		int e = err ? err : v[i].err;

		if (e)
			ZC_WARN("cell", "id=%016" PRIx64 ".%" PRIu32 ".%u not recorded err=%s",
			        w->id.extent, w->id.group, w->id.cell,
			        e > -ZC_ERR_BASE ? strerror(-e) : zc_code_word(zc_err_code(e)));
		cw_free(w, e);
	}
}

static void
record_one(struct dn_job *job)
{
	record_batch(&job, 1);
}

/* ---- public ---- */
static int
spec_check(struct dn_store *s, const struct dn_cell_spec *p)
{
	size_t bl, kl;

	if (!p || !p->bucket || !p->key)
		return -EINVAL;
	bl = strlen(p->bucket);
	kl = strlen(p->key);
	if (bl == 0 || bl > DN_CELL_BUCKET_MAX || kl == 0 || kl > DN_CELL_KEY_MAX)
		return -EINVAL;
	if (p->k == 0 || p->m == 0 || p->k + p->m > EC_MAX_CELLS || p->id.cell >= p->k + p->m)
		return -EINVAL;
	/* Chunks must tile the cell: a reader checks a stripe's part of the file alone. */
	if (p->cell_size == 0 || p->cell_size % 4096 || p->cell_size % s->o.chunk_size)
		return -EINVAL;
	if (p->stripes_per_group == 0 || p->length > (uint64_t)p->stripes_per_group * p->cell_size)
		return -EINVAL;
	return 0;
}

static int
retired_drop(struct dn_store *s, struct dn_cell_id id)
{
	struct dn_cell_info ci;
	int err = dn_cell_stat(s, id, &ci);

	if (zc_err_is(err, ZC_NO_KEY))
		return 0;
	if (err)
		return err;
	if (ci.retired)
		err = dn_cell_delete_if(s, &ci);
	dn_cell_info_fini(&ci);
	return err < 0 ? err : 0;
}

int
dn_cell_write_open(struct dn_store *s, const struct dn_cell_spec *spec, struct dn_cell_write **out)
{
	struct dn_cell_write *w;
	char dir[PATH_MAX];
	unsigned drive = 0;
	size_t ncrc;
	int err;

	if (!s || !out)
		return -EINVAL;
	err = spec_check(s, spec);
	if (err)
		return err;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->s = s;
	w->id = spec->id;
	atomic_init(&w->outstanding, 1);
	err = busy_add(s, w);
	if (err) {
		free(w);
		return err;
	}
	/* A retired entry of the name (DeleteCells kept it for readers) gives way: the name
	 * is written again only by a heal of the same extent, whose bytes are the same, and a
	 * reader of the old file keeps its open file. */
	err = retired_drop(s, w->id);
	/* An id of this node's own objects would share their file names: refuse it too. */
	if (err == 0)
		err = dn_meta_cell_exists(s->meta, w->id);
	if (err == 0)
		err = dn_meta_extent_exists(s->meta, w->id.extent);
	if (err == 1)
		err = ZC_E(ZC_CELL_EXISTS);
	if (err)
		goto unbusy;
	err = pick_drive(s, w->id, spec->length, &drive);
	if (err)
		goto unbusy;
	w->d = &s->drives[drive];
	ncrc = zc_chunk_count(spec->length, s->o.chunk_size);
	w->rec = (struct dn_cell_rec){ .drive = drive,
		                       .pending = true,
		                       .k = spec->k,
		                       .m = spec->m,
		                       .cell_size = spec->cell_size,
		                       .spg = spec->stripes_per_group,
		                       .chunk = (uint32_t)s->o.chunk_size,
		                       .length = spec->length,
		                       .bucket = dn_strdup(spec->bucket),
		                       .key = dn_strdup(spec->key),
		                       .crcs = malloc(ncrc ? ncrc * 4 : 1) };
	if (!w->rec.bucket || !w->rec.key || !w->rec.crcs) {
		err = -ENOMEM;
		goto free_rec;
	}
	zc_chunk_crc_init(&w->cc, s->o.chunk_size, w->rec.crcs, ncrc);
	err = dn_layout_mkdirs(w->d->root, w->id.extent);
	if (!err)
		err = dn_layout_path(w->d->root, w->id.extent, w->id.group, w->id.cell, w->path,
		                     sizeof(w->path));
	if (err)
		goto free_rec;
	snprintf(dir, sizeof(dir), "%s/data/%02x", w->d->root, (unsigned)(w->id.extent & 0xff));
	err = dn_dir_open(w->d, dir, &w->dir);
	if (err)
		goto free_rec;
	/* Buffered: segments lie at any address and length, O_DIRECT wants blocks. */
	err = dn_file_open(w->d, w->path, false, &w->file);
	if (err) {
		if (err == -ENOSPC || err == -EDQUOT)
			dn_drive_mark_full(w->d);
		goto close_dir;
	}
	dn_store_live_get(s);
	*out = w;
	return 0;
close_dir:
	dn_file_close(w->dir);
free_rec:
	dn_cell_rec_fini(&w->rec);
unbusy:
	busy_del(s, w);
	free(w);
	return err;
}

int
dn_cell_write_data(struct dn_cell_write *w, uint64_t offset, const struct zc_seg *segs, size_t n)
{
	struct dn_store *s = w->s;
	uint64_t total = 0;
	int err;

	if (w->err)
		return w->err;
	if (offset != w->written)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		total += segs[i].len;
	if (total > w->rec.length - w->written)
		return -EINVAL;
	if (dn_credit_over(s)) {
		flush(w); /* what we hold counts too: waiting on it would never end */
		err = dn_credit_wait(s);
		if (err)
			goto poison;
	}
	for (size_t i = 0; i < n; i++) {
		struct dn_io *io = w->pend;

		if (segs[i].len == 0)
			continue;
		err = zc_chunk_crc_add(&w->cc, segs[i].ptr, segs[i].len);
		if (err)
			goto poison;
		if (!io) {
			io = dn_iov_start(s);
			if (!io) {
				err = -EAGAIN;
				goto poison;
			}
			w->pend = io;
		}
		dn_iov_add(s, io, segs[i].ptr, segs[i].len, segs[i].ref);
		w->written += segs[i].len;
		/* A cell's worth (as the object path sends a data cell) or a full iovec. */
		if (io->niov == DN_IOV_MAX || io->len >= s->o.cell_size)
			flush(w);
	}
	return 0;
poison:
	w->err = err;
	return err;
}

void
dn_cell_write_finish(struct dn_cell_write *w, dn_cell_cb cb, void *arg)
{
	int n;

	w->cb = cb;
	w->cb_arg = arg;
	if (!w->err && w->written != w->rec.length)
		w->err = -EINVAL;
	if (w->err) {
		drop_pending(w);
	} else {
		flush(w);
		n = zc_chunk_crc_finish(&w->cc);
		if (n < 0)
			w->err = n;
		else
			w->rec.ncrc = (uint32_t)n;
	}
	unhold(w);
}

void
dn_cell_write_abort(struct dn_cell_write *w)
{
	if (!w)
		return;
	w->err = -ECANCELED;
	drop_pending(w);
	unhold(w);
}

int
dn_cell_commit(struct dn_store *s, struct dn_cell_id id)
{
	return dn_meta_cell_commit(s->meta, id);
}

int
dn_cell_stat(struct dn_store *s, struct dn_cell_id id, struct dn_cell_info *info)
{
	struct dn_cell_rec rec;
	int err = dn_meta_cell_get(s->meta, id, &rec);

	if (err)
		return err;
	dn_cell_rec_take_info(&rec, id, info);
	return 0;
}

void
dn_cell_lost_hook(struct dn_store *s, dn_cell_lost_fn fn, void *arg)
{
	pthread_mutex_lock(&s->cells->lost_lock);
	s->cells->lost_fn = fn;
	s->cells->lost_arg = arg;
	pthread_mutex_unlock(&s->cells->lost_lock);
}

void
dn_cell_lost(struct dn_store *s, struct dn_cell_id id)
{
	/* under the lock: a hook being removed (its healer going) is never called after */
	pthread_mutex_lock(&s->cells->lost_lock);
	if (s->cells->lost_fn)
		s->cells->lost_fn(s->cells->lost_arg, id);
	pthread_mutex_unlock(&s->cells->lost_lock);
}

static void unlink_cell(struct dn_store *s, struct dn_cell_id id, uint32_t drive);

int
dn_cell_delete(struct dn_store *s, struct dn_cell_id id)
{
	uint32_t drive = UINT32_MAX;
	int err = dn_meta_cell_del(s->meta, id, &drive);

	/* Entry first: a crash before the unlink leaves a file no entry names, which the next
	 * open sweeps; the other order could leave an entry naming no file. */
	if (err == 1)
		unlink_cell(s, id, drive);
	return err;
}

static uint64_t
real_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Remove the file of a cell whose entry just went (entry first, as dn_cell_delete). */
static void
unlink_cell(struct dn_store *s, struct dn_cell_id id, uint32_t drive)
{
	char path[PATH_MAX];

	if (drive < s->ndrives &&
	    !dn_layout_path(s->drives[drive].root, id.extent, id.group, id.cell, path,
	                    sizeof(path)) &&
	    unlink(path) < 0 && errno != ENOENT)
		ZC_WARN("cell", "unlink %s failed err=%s", path, strerror(errno));
}

int
dn_cell_retire(struct dn_store *s, struct dn_cell_id id)
{
	struct dn_cell_rec rec;
	int err = dn_meta_cell_get(s->meta, id, &rec);
	bool pending;

	if (zc_err_is(err, ZC_NO_KEY))
		return 0;
	if (err)
		return err;
	pending = rec.pending;
	dn_cell_rec_fini(&rec);
	/* A pending cell was never named by a committed record a reader could be following
	 * (a failed write's, a heal's that did not commit): it goes at once. */
	if (pending)
		return dn_cell_delete(s, id);
	err = dn_meta_cell_touch(s->meta, id, true, real_now_ns());
	if (err == 1)
		atomic_fetch_add(&s->cells->n_retired, 1);
	return zc_err_is(err, ZC_NO_KEY) ? 0 : err < 0 ? err : 1;
}

uint64_t
dn_cell_retired_total(struct dn_store *s)
{
	return s && s->cells ? atomic_load(&s->cells->n_retired) : 0;
}

int
dn_cell_touch(struct dn_store *s, struct dn_cell_id id)
{
	int err = dn_meta_cell_touch(s->meta, id, false, real_now_ns());

	return err < 0 ? err : 0;
}

int
dn_cell_delete_if(struct dn_store *s, const struct dn_cell_info *expect)
{
	uint32_t drive = UINT32_MAX;
	int err = dn_meta_cell_del_if(s->meta, expect, &drive);

	if (err == 1)
		unlink_cell(s, expect->id, drive);
	return err;
}

int
dn_cell_list_pending_older(struct dn_store *s, uint64_t than_ns, size_t limit,
                           struct dn_cell_info **out, size_t *n)
{
	if (!s || !out || !n)
		return -EINVAL;
	return dn_meta_cell_list(s->meta, NULL, DN_META_CELLS_PENDING, than_ns, limit, out, n);
}

int
dn_cell_list_retired_older(struct dn_store *s, uint64_t than_ns, size_t limit,
                           struct dn_cell_info **out, size_t *n)
{
	if (!s || !out || !n)
		return -EINVAL;
	return dn_meta_cell_list(s->meta, NULL, DN_META_CELLS_RETIRED, than_ns, limit, out, n);
}

int
dn_cell_list(struct dn_store *s, const struct dn_cell_id *after, size_t limit,
             struct dn_cell_info **out, size_t *n)
{
	if (!s || !out || !n)
		return -EINVAL;
	return dn_meta_cell_list(s->meta, after, DN_META_CELLS_ALL, 0, limit, out, n);
}
