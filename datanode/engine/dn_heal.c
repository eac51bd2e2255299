/*
 * Heal: rebuild every cell placed on one drive that is marked missing, sits on a failed
 * (replaced) drive, or fails its checks, from the other cells of each stripe; write it to
 * a temp name, fdatasync, rename over, then clear its missing mark in the metadata.
 * Reads go through the drive rings (dn_read_stripe); the rebuilt file is written with
 * pwrite on the caller's thread.
 *
 * Two callers: `zest-datanode heal` (offline, a replaced or failed drive: every cell on it
 * is checked) and the background healer thread (online, only cells marked missing, on
 * drives that are writable, and metadata replicas a failed write dropped there; it runs
 * beside live traffic: an object deleted or overwritten meanwhile makes the metadata
 * update ZC_E(ZC_NO_KEY), and the rebuilt file is swept at restart).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dn_internal.h"

struct heal {
	struct dn_store *s;
	unsigned drive;
	bool only_missing; /* background: trust cells not marked missing, read nothing else */
	long rebuilt;
	uint8_t *mem;
	size_t mem_len;
	struct dn_rctx *rc;
};

/* Rebuild cell c of group g into its file if any stripe of it is not good. */
static int
heal_cell(struct heal *h, struct dn_extent *e, uint32_t g, unsigned c, bool *changed)
{
	unsigned n = e->g.k + e->g.m;
	uint32_t ns = dn_geom_nstripes(&e->g, g);
	uint64_t flen = dn_geom_file_len(&e->g, g, c);
	char path[PATH_MAX], tmp[PATH_MAX + 8];
	uint8_t *cells[EC_MAX_CELLS];
	bool bad = false;
	int fd = -1, err = 0;

	if (flen == 0)
		return 0;
	for (unsigned i = 0; i < n; i++)
		cells[i] = h->mem + (size_t)i * e->g.cell;
	/* A pass to learn whether anything is wrong; the write pass repeats the reads. */
	for (uint32_t st = 0; st < ns && !bad; st++) {
		err = dn_read_stripe(h->rc, g, st, 1u << c, 0, cells, &bad);
		if (err)
			return err;
	}
	if (!bad && !(e->groups[g].missing & (1u << c)))
		return 0;
	err = dn_layout_mkdirs(h->s->drives[h->drive].root, e->id);
	if (!err)
		err = dn_layout_path(h->s->drives[h->drive].root, e->id, g, c, path, sizeof(path));
	if (err)
		return err;
	snprintf(tmp, sizeof(tmp), "%s.heal", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	for (uint32_t st = 0; st < ns; st++) {
		uint32_t len = dn_geom_cell_len(&e->g, g, st, c);
		bool degraded = false;

		/* Skip this cell's own copy, so what we write is rebuilt, never copied. */
		err = dn_read_stripe(h->rc, g, st, 1u << c, 1u << c, cells, &degraded);
		if (err)
			goto close_fd;
		if (len && pwrite(fd, cells[c], len, (off_t)st * e->g.cell) != (ssize_t)len) {
			err = -EIO;
			goto close_fd;
		}
	}
	if (fdatasync(fd) < 0 || rename(tmp, path) < 0) {
		err = -errno;
		goto close_fd;
	}
	close(fd);
	e->groups[g].missing &= ~(1u << c);
	*changed = true;
	h->rebuilt++;
	atomic_fetch_add(&h->s->cells_healed, 1);
	return 0;
close_fd:
	close(fd);
	unlink(tmp);
	return err;
}

static int
heal_extent(void *arg, struct dn_extent *e)
{
	struct heal *h = arg;
	size_t need = (size_t)(e->g.k + e->g.m) * e->g.cell;
	bool changed = false;
	struct dn_rctx rc;
	int err = 0;

	if (h->only_missing && atomic_load(&h->s->heal_stop))
		return -ECANCELED; /* shutting down: the next start's first turn goes on */

	if (need > h->mem_len) {
		uint8_t *p = realloc(h->mem, need);

		if (!p)
			return -ENOMEM;
		h->mem = p;
		h->mem_len = need;
	}
	dn_rctx_init(&rc, h->s, e);
	h->rc = &rc;
	for (uint32_t g = 0; g < e->ngroups && !err; g++)
		for (unsigned c = 0; c < e->g.k + e->g.m && !err; c++) {
			if (e->groups[g].drives[c] != h->drive)
				continue;
			if (h->only_missing && !(e->groups[g].missing & (1u << c)))
				continue;
			err = heal_cell(h, e, g, c, &changed);
			if (err)
				ZC_ERR("heal", "id=%llx group=%u cell=%u err=%s",
				       (unsigned long long)e->id, g, c, strerror(-err));
		}
	dn_rctx_fini(&rc);
	h->rc = NULL;
	if (err)
		return err;
	if (!changed)
		return 0;
	err = dn_meta_update_extent(h->s->meta, e);
	/* Deleted while we healed it: the rebuilt files go at the next restart's sweep. */
	return zc_err_is(err, ZC_NO_KEY) ? 0 : err;
}

long
dn_heal(struct dn_store *s, unsigned drive)
{
	struct heal h = { .s = s, .drive = drive };
	char path[PATH_MAX];
	int err;

	if (drive >= s->ndrives)
		return -EINVAL;
	snprintf(path, sizeof(path), "%s/data", s->drives[drive].root);
	if (mkdir(s->drives[drive].root, 0755) < 0 && errno != EEXIST)
		return -errno;
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return -errno;
	/* A replaced folder also lost its metadata copy: make it whole first. */
	err = dn_meta_rebuild_replica(s->meta, drive);
	if (err)
		return err;
	err = dn_meta_each_extent(s->meta, heal_extent, &h);
	free(h.mem);
	if (err < 0)
		return err;
	atomic_store(&s->drives[drive].state, DN_DRIVE_OK);
	ZC_INFO("heal", "drive=%u rebuilt=%ld cells", drive, h.rebuilt);
	return h.rebuilt;
}

/* ---- background healer ---- */

/* One turn: bring back the dropped metadata replica and rebuild the missing cells of every
 * writable drive. True when some remain (a drive still full or failing, an error): the
 * next turn tries again. */
static bool
heal_turn(struct dn_store *s)
{
	bool again = false;

	for (unsigned d = 0; d < s->ndrives; d++) {
		struct heal h = { .s = s, .drive = d, .only_missing = true };
		int st = atomic_load(&s->drives[d].state);
		int err;

		if (st == DN_DRIVE_FAILED)
			continue; /* the operator's: `zest-datanode heal` after replacing it */
		/* Re-probe here too: with no writes and no scrapes nothing else would. */
		if (st == DN_DRIVE_FULL && !dn_drive_reprobe(&s->drives[d])) {
			again = true; /* its missing cells (and replica) wait for room */
			continue;
		}
		/* A metadata replica a write dropped (a full drive): back into the live set
		 * first, so the missing marks cleared below reach it too. */
		err = dn_meta_revive_replica(s->meta, d);
		if (err < 0)
			again = true; /* logged there; -ENOSPC marked the drive full again */
		err = dn_meta_each_extent(s->meta, heal_extent, &h);
		free(h.mem);
		if (err == -ECANCELED)
			return true;
		if (err < 0) {
			ZC_WARN("heal", "background drive=%u err=%s", d, strerror(-err));
			again = true;
		}
		if (h.rebuilt)
			ZC_INFO("heal", "background drive=%u rebuilt=%ld cells", d, h.rebuilt);
	}
	return again;
}

static void *
healer_main(void *arg)
{
	struct dn_store *s = arg;

	pthread_mutex_lock(&s->heal_lock);
	while (!s->heal_stop) {
		struct timespec until;

		zc_deadline(&until, CLOCK_REALTIME, s->o.heal_interval_ns);
		pthread_cond_timedwait(&s->heal_cond, &s->heal_lock, &until);
		if (s->heal_stop || !atomic_exchange(&s->heal_pending, false))
			continue;
		pthread_mutex_unlock(&s->heal_lock);
		if (heal_turn(s))
			dn_heal_note(s);
		pthread_mutex_lock(&s->heal_lock);
	}
	pthread_mutex_unlock(&s->heal_lock);
	return NULL;
}

int
dn_healer_start(struct dn_store *s)
{
	int err;

	if (!s->o.heal_interval_ns || s->o.discard)
		return 0;
	err = -pthread_create(&s->heal_thread, NULL, healer_main, s);
	if (err)
		return err;
	pthread_setname_np(s->heal_thread, "dn-heal");
	s->heal_ok = true;
	return 0;
}

void
dn_healer_stop(struct dn_store *s)
{
	if (!s->heal_ok)
		return;
	pthread_mutex_lock(&s->heal_lock);
	s->heal_stop = true;
	pthread_cond_signal(&s->heal_cond);
	pthread_mutex_unlock(&s->heal_lock);
	pthread_join(s->heal_thread, NULL);
	s->heal_ok = false;
}
