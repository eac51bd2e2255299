/*
 * Finishing a write: the fsyncs of its folders once every cell is durable, the metadata
 * commit (batched across writes on the commit thread, with the caller's condition checked
 * in the transaction), and abort: a write that will not commit drops its cells and files.
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
	dn_store_live_put(s);
}

/*
 * Build the extent record from what was written; when a group missed quorum: -ENOSPC if
 * a full drive cost it cells (space may come back), else ZC_E(ZC_NO_QUORUM) (not -EIO: that is
 * the metadata's I/O error, reported differently).
 */
static int
build_extent(struct dn_write *w, struct dn_extent *e)
{
	unsigned quorum = dn_store_quorum(w->s, w->k, w->n);
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
			return full ? -ENOSPC : ZC_E(ZC_NO_QUORUM);
		}
		memcpy(e->groups[gi].drives, g->drives, w->n);
		e->groups[gi].missing = missing;
		for (unsigned c = 0; c < w->n; c++) {
			int cnt = zc_chunk_crc_finish(&g->cc[c]);
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
	if (dn_write_submit_sync(w, DN_IO_FSYNC_DIR, w->dirs[d], NULL, d) < 0)
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
	dn_write_unhold(w);
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
		/* Stored writes commit in dn_commit_batch: only --discard ends here. */
		assert(w->s->o.discard);
		finish_discard(w);
	}
}

/*
 * Commit a run of finished writes, and of the Deletes and Composes queued among them
 * (dn_mcall.c), with one metadata transaction (one sync per replica), in queue order.
 */
void
dn_commit_batch(struct dn_job **jobs, size_t n)
{
	struct dn_meta_put puts[DN_BATCH_MAX];
	struct dn_extent ext[DN_BATCH_MAX];
	struct dn_piece piece[DN_BATCH_MAX];
	struct dn_obj obj[DN_BATCH_MAX];
	struct dn_write *ws[DN_BATCH_MAX]; /* NULL: a metadata call, in js */
	struct dn_job *js[DN_BATCH_MAX];
	struct dn_store *s = NULL;
	struct timespec ts;
	bool calls = false;
	uint64_t now;
	size_t np = 0;

	clock_gettime(CLOCK_REALTIME, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	for (size_t i = 0; i < n; i++) {
		struct dn_write *w;
		int err;

		if (dn_mcall_job(jobs[i])) {
			if (dn_mcall_prepare(jobs[i], &puts[np], &s)) {
				memset(&ext[np], 0, sizeof(ext[np]));
				ws[np] = NULL;
				js[np++] = jobs[i];
				calls = true;
			}
			continue;
		}
		w = (struct dn_write *)((char *)jobs[i] - offsetof(struct dn_write, job));
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
		js[np] = jobs[i];
		ws[np++] = w;
	}
	if (np)
		dn_meta_put_batch(s->meta, puts, np);
	if (calls)
		atomic_fetch_add(&s->mcall_txns, 1);
	for (size_t i = 0; i < np; i++) {
		struct dn_write *w = ws[i];
		struct dn_write_result res;

		if (!w) {
			dn_mcall_finish(js[i], &puts[i]);
			continue;
		}
		res = (struct dn_write_result){ w->written, w->crc, w->etag, now };
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
		for (size_t j = 0; j < puts[i].nfreed; j++)
			dn_extent_drop(s, &puts[i].freed[j]);
		free(puts[i].freed);
		w->cb(w->cb_arg, 0, &res);
		write_free(w);
	}
}

void
dn_write_unhold(struct dn_write *w)
{
	if (atomic_fetch_sub(&w->outstanding, 1) != 1)
		return;
	dn_write_unclaim(w); /* every cell buffer is back in its pool */
	if (!w->aborted && w->phase == PH_WRITE && w->err == 0 && !w->s->o.discard) {
		start_sync(w);
		return;
	}
	w->job.fn = finish_job;
	w->job.batch = dn_commit_batch;
	dn_store_defer(w->s, &w->job);
}

/* Nothing of w will commit: drop the cells and parity it still holds; its ios drain. */
static void
write_doom(struct dn_write *w)
{
	atomic_store(&w->doomed, true);
	for (unsigned c = 0; c < w->k; c++)
		dn_write_drop_pending(w, c);
	if (w->stripe_open)
		dn_write_release_parity(w);
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
		int err;

		w->closing = true;
		err = dn_write_stripe_close(w);
		w->closing = false;
		if (err)
			w->err = err;
	}
	if (w->err) {
		write_doom(w);
	} else {
		/* Every file of the write exists now: make the new names durable while the last
		 * writes and fdatasyncs run, not after them (start_sync finds them done). */
		for (unsigned d = 0; d < w->s->ndrives; d++)
			if (w->drives_used[d])
				sync_dir(w, d);
	}
	dn_write_release_group(w);
	dn_write_unhold(w);
}

void
dn_write_abort(struct dn_write *w)
{
	if (!w)
		return;
	w->aborted = true;
	write_doom(w);
	dn_write_release_group(w);
	dn_write_unhold(w);
}
