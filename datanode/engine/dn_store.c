/* The store: drives, metadata, shared pools and the metadata-only object calls. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dn_internal.h"

/* Unlink every file of an extent (best effort). */
static void
extent_unlink_files(struct dn_store *s, const struct dn_extent *e)
{
	char path[PATH_MAX];

	for (uint32_t g = 0; g < e->ngroups; g++)
		for (unsigned c = 0; c < e->g.k + e->g.m; c++) {
			unsigned d = e->groups[g].drives[c];

			if (d < s->ndrives &&
			    !dn_layout_path(s->drives[d].root, e->id, g, c, path, sizeof(path)))
				unlink(path);
		}
}

struct dn_ext_hold {
	struct dn_ext_hold *next;
	uint64_t id;
	unsigned refs;
	bool doomed;           /* freed by the metadata: its files go at the last unhold */
	struct dn_extent dead; /* then the freed extent, whole (a read may borrow it) */
};

/* Under hold_lock. */
static struct dn_ext_hold **
hold_find(struct dn_store *s, uint64_t id)
{
	struct dn_ext_hold **p = &s->holds[id % DN_HOLD_BUCKETS];

	while (*p && (*p)->id != id)
		p = &(*p)->next;
	return p;
}

int
dn_extent_hold(struct dn_store *s, uint64_t id)
{
	struct dn_ext_hold **p, *h;

	pthread_mutex_lock(&s->hold_lock);
	p = hold_find(s, id);
	if (*p) {
		(*p)->refs++;
		pthread_mutex_unlock(&s->hold_lock);
		return 0;
	}
	h = calloc(1, sizeof(*h));
	if (!h) {
		pthread_mutex_unlock(&s->hold_lock);
		return -ENOMEM;
	}
	h->id = id;
	h->refs = 1;
	*p = h;
	pthread_mutex_unlock(&s->hold_lock);
	return 0;
}

static void
hold_free(struct dn_store *s, struct dn_ext_hold *h)
{
	if (h->doomed) {
		extent_unlink_files(s, &h->dead);
		dn_extent_free(&h->dead);
	}
	free(h);
}

void
dn_extent_unhold(struct dn_store *s, uint64_t id)
{
	struct dn_ext_hold **p, *h = NULL;

	pthread_mutex_lock(&s->hold_lock);
	p = hold_find(s, id);
	if (*p && --(*p)->refs == 0) {
		h = *p;
		*p = h->next;
	}
	pthread_mutex_unlock(&s->hold_lock);
	if (h)
		hold_free(s, h);
}

int
dn_extent_get_held(struct dn_store *s, uint64_t id, struct dn_extent *e, bool *borrowed)
{
	int err = dn_meta_get_extent(s->meta, id, e);
	struct dn_ext_hold *h;

	*borrowed = false;
	if (!zc_err_is(err, ZC_NO_KEY))
		return err;
	pthread_mutex_lock(&s->hold_lock);
	h = *hold_find(s, id);
	if (h && h->doomed) {
		*e = h->dead; /* immutable, and kept while this read holds it */
		*borrowed = true;
		err = 0;
	}
	pthread_mutex_unlock(&s->hold_lock);
	return err;
}

int
dn_extent_held_live(struct dn_store *s, uint64_t id)
{
	int live = dn_meta_extent_exists(s->meta, id);
	struct dn_ext_hold *h;

	if (live != 0)
		return live;
	pthread_mutex_lock(&s->hold_lock);
	h = *hold_find(s, id);
	live = h && h->doomed;
	pthread_mutex_unlock(&s->hold_lock);
	return live;
}

void
dn_extent_drop(struct dn_store *s, struct dn_extent *e)
{
	struct dn_ext_hold *h;

	pthread_mutex_lock(&s->hold_lock);
	h = *hold_find(s, e->id);
	if (h && !h->doomed) {
		h->dead = *e; /* ours now: unlinked and freed at the last unhold */
		h->doomed = true;
		e->groups = NULL;
		e->crc_mem = NULL;
		pthread_mutex_unlock(&s->hold_lock);
		return;
	}
	pthread_mutex_unlock(&s->hold_lock);
	extent_unlink_files(s, e);
	dn_extent_free(e);
}

void
dn_extent_holds_fini(struct dn_store *s)
{
	for (unsigned i = 0; i < DN_HOLD_BUCKETS; i++)
		while (s->holds[i]) {
			struct dn_ext_hold *h = s->holds[i];

			s->holds[i] = h->next;
			hold_free(s, h);
		}
}

/* How long close waits for writes still finishing before it goes on regardless. */
#define DN_CLOSE_WAIT_NS (30ull * 1000000000u)

/* The metadata dropped a replica: the healer revives it at its next turn. */
static void
meta_dropped(void *arg)
{
	dn_heal_note(arg);
}

int
dn_store_open(const struct dn_store_opts *opts, struct dn_store **out)
{
	struct dn_store *s;
	int err;

	if (!opts || !opts->drives || opts->ndrives == 0 || opts->ndrives > DN_MAX_DRIVES ||
	    opts->k == 0 || opts->m == 0 ||
	    (opts->k + opts->m > opts->ndrives && !opts->cells_only) ||
	    opts->k + opts->m > EC_MAX_CELLS || opts->cell_size == 0 || opts->cell_size % 4096 ||
	    opts->chunk_size == 0 || opts->cell_size % opts->chunk_size ||
	    opts->cell_size > UINT32_MAX || opts->stripes_per_group == 0 ||
	    opts->queue_depth == 0 || opts->parity_bufs == 0)
		return -EINVAL;
	if (opts->data_direct && opts->no_direct) {
		ZC_ERR("store", "data_direct and no_direct contradict each other");
		return -EINVAL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->o = *opts;
	s->metrics_fd = -1;
	s->metrics_pipe[0] = s->metrics_pipe[1] = -1;
	pthread_mutex_init(&s->heal_lock, NULL);
	pthread_cond_init(&s->heal_cond, NULL);
	pthread_mutex_init(&s->hold_lock, NULL);
	err = dn_store_base_init(s);
	if (err)
		goto fail;
	/* The layer beside the engine (the cell store) sets up its state on the store. */
	err = opts->side && opts->side->init ? opts->side->init(s) : 0;
	if (err)
		goto fail;
	for (unsigned d = 0; d < opts->ndrives; d++) {
		struct dn_drive_opts dop = {
			.owner = s,
			.queue_depth = opts->queue_depth,
			.no_direct = opts->no_direct,
			.cell_size = (uint32_t)opts->cell_size,
			.pool_bufs = opts->parity_bufs * (opts->data_direct ? 2 : 1),
			.full_need = (uint64_t)opts->stripes_per_group * opts->cell_size,
			.full_probe_ns = opts->full_probe_ns,
			.on_write_done = dn_admission_note,
		};

		s->ndrives = d + 1;
		err = dn_drive_init(&s->drives[d], &dop, d, opts->drives[d]);
		if (err) {
			ZC_ERR("store", "drive=%s init failed err=%s", opts->drives[d],
			       strerror(-err));
			goto fail;
		}
		if (opts->data_direct && !s->drives[d].direct_ok) {
			/* Asked for by name: silently writing through the page cache instead
			 * would make every measurement of the mode a lie. */
			ZC_ERR("store",
			       "drive=%s does not accept O_DIRECT writes: --data-io direct needs "
			       "a file system that does (use --data-io buffered)",
			       opts->drives[d]);
			err = -EINVAL;
			goto fail;
		}
	}
	err = dn_store_check_identity(s);
	if (err)
		goto fail;
	err = dn_meta_open(&(struct dn_meta_opts){ .drives = s->drives,
	                                           .ndrives = s->ndrives,
	                                           .replicas = opts->m + 1,
	                                           .map_size = opts->meta_map_size,
	                                           .on_drop = meta_dropped,
	                                           .arg = s },
	                   &s->meta);
	if (err)
		goto fail;
	for (unsigned d = 0; d < s->ndrives; d++)
		if ((s->emptied >> d & 1) && opts->side && opts->side->drive_emptied) {
			err = opts->side->drive_emptied(s, d);
			if (err)
				goto fail;
		}
	dn_store_collect(s);
	err = dn_store_commit_start(s);
	if (err)
		goto fail;
	err = dn_admission_start(s);
	if (err)
		goto fail;
	/* Cells missed before a restart are healed too: the first turn looks. */
	dn_heal_note(s);
	err = dn_healer_start(s);
	if (err)
		goto fail;
	*out = s;
	return 0;
fail:
	dn_store_close(s);
	return err;
}

void
dn_store_close(struct dn_store *s)
{
	if (!s)
		return;
	dn_admission_stop(s);
	dn_healer_stop(s); /* it reads through the rings and commits metadata: first */
	dn_metrics_stop(s);
	/* An aborted write still finishing (its last completions) must end before the rings go. */
	dn_store_live_wait(s, DN_CLOSE_WAIT_NS);
	/* Drives first: their last completions may still hand jobs to the commit thread. */
	for (unsigned d = 0; d < s->ndrives; d++)
		dn_drive_fini(&s->drives[d]);
	dn_store_commit_stop(s);
	dn_meta_close(s->meta);
	if (s->o.side && s->o.side->fini)
		s->o.side->fini(s);
	dn_store_base_fini(s);
	pthread_mutex_destroy(&s->heal_lock);
	pthread_cond_destroy(&s->heal_cond);
	dn_extent_holds_fini(s);
	pthread_mutex_destroy(&s->hold_lock);

	free(s);
}

/* ---- buckets ---- */
int
dn_bucket_create(struct dn_store *s, const char *name, uint64_t *ctime_ns)
{
	return dn_meta_bucket_create(s->meta, name, ctime_ns);
}

int
dn_bucket_delete(struct dn_store *s, const char *name)
{
	return dn_meta_bucket_delete(s->meta, name);
}

int
dn_bucket_head(struct dn_store *s, const char *name, uint64_t *ctime_ns)
{
	if (!name)
		return -EINVAL;
	return dn_meta_bucket_head(s->meta, name, ctime_ns);
}

int
dn_bucket_list(struct dn_store *s, struct dn_bucket_info **out, size_t *n)
{
	return dn_meta_bucket_list(s->meta, out, n);
}

/* ---- objects ---- */
int
dn_stat(struct dn_store *s, const char *bucket, const char *key, struct dn_object_info *info)
{
	struct dn_obj o;
	int err;

	if (!bucket || !key)
		return -EINVAL;
	err = dn_meta_get_obj(s->meta, bucket, key, &o);
	if (err)
		return err;
	dn_obj_take_info(&o, key, info);
	dn_obj_fini(&o);
	return info->key ? 0 : -ENOMEM;
}

void
dn_extents_release(struct dn_store *s, struct dn_extent *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dn_extent_drop(s, &v[i]);
	free(v);
}

int
dn_delete(struct dn_store *s, const char *bucket, const char *key)
{
	struct dn_extent *freed = NULL;
	size_t nfreed = 0;
	int err;

	if (!bucket || !key)
		return -EINVAL;
	err = dn_meta_del_obj(s->meta, bucket, key, &freed, &nfreed);
	if (err >= 0)
		dn_extents_release(s, freed, nfreed);
	return err;
}

int
dn_list(struct dn_store *s, const char *bucket, const char *prefix, const char *start_after,
        unsigned limit, const char *delimiter, struct dn_list_result *out)
{
	if (!bucket)
		return -EINVAL;
	return dn_meta_list(s->meta, bucket, prefix, start_after, limit, delimiter, out);
}

/* ---- drives ---- */
int
dn_drive_state_get(struct dn_store *s, unsigned drive)
{
	if (drive >= s->ndrives)
		return -EINVAL;
	return atomic_load(&s->drives[drive].state);
}

int
dn_drive_fail(struct dn_store *s, unsigned drive)
{
	if (drive >= s->ndrives)
		return -EINVAL;
	atomic_store(&s->drives[drive].state, DN_DRIVE_FAILED);
	ZC_WARN("store", "drive=%u marked failed", drive);
	return 0;
}
