/*
 * The scrubber (dn_scrub.h): every cell this node holds read back at a bounded rate and
 * checked against its recorded chunk CRC32Cs and length.
 *
 * Why pread on this thread and not the drives' rings: the rings read through the page
 * cache (dn_file_open_read opens buffered), and a scrub that reads a cached page checks
 * memory, not the sector under it. O_DIRECT reads go to the media (the kernel writes back
 * dirty pages of the range first, so a file written a moment ago reads as written), and
 * leave the cache to the live reads. The rate is a few MiB/s and one read at a time is
 * all it needs, so the rings' parallelism buys nothing, and staying off them leaves their
 * io pool, queue slots and registered files to the clients' traffic. Where a file system
 * refuses O_DIRECT (tmpfs) the file is read buffered and its cached pages dropped
 * (POSIX_FADV_DONTNEED) before and after, which is the best it offers.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dn_internal.h"
#include "dn_scrub.h"
#include "zc_loop.h"

#define SCRUB_WINDOW   (1u << 20) /* bytes per read */
#define SCRUB_FIRST_NS 600000000000ull

static const char *const kind_word[DN_SCRUB_KINDS] = { "crc", "size", "missing", "io" };

struct dn_scrub {
	struct dn_scrub_opts o;
	struct zc_loop loop;
	/* the scrubbing thread's (or the test's) */
	uint8_t *buf;
	size_t buf_len;
	uint64_t next_ns; /* pacing: the next read may start at */
	/* counters and gauges, for /metrics */
	atomic_uint_fast64_t bytes, cells, repaired, passes;
	atomic_uint_fast64_t errors[DN_SCRUB_KINDS];
	atomic_uint_fast64_t pass_ns, last_pass_s;
};

/* Wait until the next n bytes may be read: n / rate after the previous read's turn, never
 * earlier than now (time spent idle, between passes, buys no burst). False: stopping. */
static bool
pace(struct dn_scrub *sc, size_t n)
{
	uint64_t now = zc_now_ns();

	if (sc->next_ns > now) {
		if (!zc_loop_wait(&sc->loop, sc->next_ns - now))
			return false;
		now = sc->next_ns;
	} else if (zc_loop_stopping(&sc->loop)) {
		return false;
	}
	sc->next_ns = now + (uint64_t)n * 1000000000ull / sc->o.rate_bps;
	return true;
}

static uint64_t
block_up(uint64_t n)
{
	return (n + DN_DIRECT_ALIGN - 1) / DN_DIRECT_ALIGN * DN_DIRECT_ALIGN;
}

/* Read n bytes at off (asking for want >= n: a direct read takes whole blocks), going on
 * after short reads: the bytes read, or -errno. */
static ssize_t
read_full(int fd, uint8_t *p, size_t want, size_t n, off_t off)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = pread(fd, p + got, want - got, off + (off_t)got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

/*
 * Is err (an open's or a read's) evidence against the file? The drive's (EIO) or the
 * file's (ENOENT) is; running out of descriptors or memory, or a permission, says nothing
 * about the bytes, and handing a good cell to the healer for it would be wrong.
 */
static bool
file_fault(int err, enum dn_scrub_kind *kind)
{
	if (err == ENOENT) {
		*kind = DN_SCRUB_MISSING;
		return true;
	}
	*kind = DN_SCRUB_IO;
	return err == EIO || err == ENXIO || err == EBADMSG || err == EUCLEAN || err == ENODATA;
}

/*
 * Check one cell file: flen bytes, a CRC32C per chunk bytes (ncrc of them, the last one
 * short). Returns 0 good, 1 bad (*kind says how), 2 not checked (an error that is not the
 * file's, logged), -ECANCELED when stopping, -ENOMEM.
 */
static int
check_file(struct dn_scrub *sc, unsigned drive, const char *path, uint64_t flen, uint32_t chunk,
           const uint32_t *crcs, size_t ncrc, enum dn_scrub_kind *kind)
{
	struct dn_drive *d = &sc->o.store->drives[drive];
	size_t win = chunk >= SCRUB_WINDOW ? chunk : SCRUB_WINDOW / chunk * chunk;
	bool direct = true;
	struct stat st;
	int fd, rc = 0;

	if (chunk == 0 || ncrc != zc_chunk_count(flen, chunk)) {
		*kind = DN_SCRUB_SIZE; /* a record that cannot describe its file */
		return 1;
	}
	if (sc->buf_len < win + DN_DIRECT_ALIGN) {
		free(sc->buf);
		sc->buf_len = 0;
		if (posix_memalign((void **)&sc->buf, DN_DIRECT_ALIGN, win + DN_DIRECT_ALIGN)) {
			sc->buf = NULL;
			return -ENOMEM;
		}
		sc->buf_len = win + DN_DIRECT_ALIGN;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
	if (fd < 0 && errno == EINVAL) {
		direct = false;
		fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	if (fd < 0) {
		int e = errno;

		if (file_fault(e, kind))
			return 1;
		ZC_WARN("scrub", "cannot open path=%s err=%s: not checked", path, strerror(e));
		return 2;
	}
	if (fstat(fd, &st) < 0) {
		rc = file_fault(errno, kind) ? 1 : 2;
		goto close_fd;
	}
	/* Longer by less than a block is an O_DIRECT parity tail, padded on write (dn_write.c)
	 * and never cut back; reads take the recorded length. */
	if ((uint64_t)st.st_size < flen || (uint64_t)st.st_size > block_up(flen)) {
		*kind = DN_SCRUB_SIZE;
		rc = 1;
		goto close_fd;
	}
	/* O_DIRECT offsets and lengths go in whole blocks; a window that is not one (a chunk
	 * size off the 4 KiB grid) is read buffered. */
	if (direct && win % DN_DIRECT_ALIGN && fcntl(fd, F_SETFL, 0) == 0)
		direct = false;
	if (!direct)
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	for (uint64_t off = 0; off < flen && !rc; off += win) {
		size_t n = flen - off < win ? (size_t)(flen - off) : win;
		size_t want = direct ? (size_t)block_up(n) : n;
		ssize_t got;

		if (!pace(sc, n)) {
			rc = -ECANCELED;
			break;
		}
		got = read_full(fd, sc->buf, want, n, (off_t)off);
		if (got < 0) {
			rc = file_fault((int)-got, kind) ? 1 : 2;
			if (rc == 2)
				ZC_WARN("scrub", "cannot read path=%s err=%s: not checked", path,
				        strerror((int)-got));
			break;
		}
		if ((size_t)got < n) {
			atomic_fetch_add(&sc->bytes, (uint64_t)got);
			*kind = DN_SCRUB_SIZE; /* cut short since the fstat */
			rc = 1;
			break;
		}
		atomic_fetch_add(&sc->bytes, n); /* not a direct read's padding past n */
		for (size_t at = 0; at < n; at += chunk) {
			size_t len = n - at < chunk ? n - at : chunk;
			size_t idx = (size_t)((off + at) / chunk);

			if (zc_crc32c(0, sc->buf + at, len) != crcs[idx]) {
				/* the drive's own count: a rising one names a drive going bad */
				atomic_fetch_add(&d->crc_mismatches, 1);
				*kind = DN_SCRUB_CRC;
				rc = 1;
				break;
			}
		}
	}
	if (!direct)
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
close_fd:
	close(fd);
	if (rc == 0 || rc == 1)
		atomic_fetch_add(&sc->cells, 1);
	return rc;
}

static void
count_bad(struct dn_scrub *sc, struct dn_scrub_stats *st, enum dn_scrub_kind kind, bool repaired)
{
	atomic_fetch_add(&sc->errors[kind], 1);
	st->errors[kind]++;
	if (repaired) {
		atomic_fetch_add(&sc->repaired, 1);
		st->repaired++;
	}
}

/* ---- single-node objects: the extents table ---- */

struct ext_walk {
	struct dn_scrub *sc;
	struct dn_scrub_stats *st;
};

/* Cell c of group g of e is bad: mark it missing for the background healer. */
static void
extent_cell_bad(struct ext_walk *w, const struct dn_extent *e, uint32_t g, unsigned c,
                unsigned drive, enum dn_scrub_kind kind, const char *path)
{
	struct dn_store *s = w->sc->o.store;
	int rc = dn_meta_mark_missing(s->meta, e->id, g, c, drive);

	if (zc_err_is(rc, ZC_NO_KEY))
		return; /* deleted while we read it: its files went with it, not rot */
	if (rc < 0)
		ZC_ERR("scrub", "cannot mark id=%llx group=%u cell=%u missing err=%s",
		       (unsigned long long)e->id, g, c, strerror(-rc));
	else
		ZC_WARN("scrub", "bad cell id=%llx group=%u cell=%u drive=%u kind=%s path=%s: %s",
		        (unsigned long long)e->id, g, c, drive, kind_word[kind], path,
		        rc ? "marked missing, the healer rebuilds it" : "already marked");
	if (rc == 1)
		dn_heal_note(s);
	count_bad(w->sc, w->st, kind, rc == 1);
}

static int
scrub_extent(void *arg, struct dn_extent *e)
{
	struct ext_walk *w = arg;
	struct dn_store *s = w->sc->o.store;

	for (uint32_t g = 0; g < e->ngroups; g++)
		for (unsigned c = 0; c < e->g.k + e->g.m; c++) {
			uint64_t flen = dn_geom_file_len(&e->g, g, c);
			unsigned d = e->groups[g].drives[c];
			enum dn_scrub_kind kind = DN_SCRUB_IO;
			char path[PATH_MAX];
			int rc;

			if (zc_loop_stopping(&w->sc->loop))
				return -ECANCELED;
			/* nothing to rot; known bad; or on a drive nobody reads */
			if (flen == 0 || (e->groups[g].missing & (1u << c)) || d >= s->ndrives ||
			    !dn_drive_ok(&s->drives[d]))
				continue;
			if (dn_layout_path(s->drives[d].root, e->id, g, c, path, sizeof(path)))
				continue;
			rc = check_file(w->sc, d, path, flen, e->g.chunk, dn_extent_crcs(e, g, c),
			                dn_extent_ncrc(e, g, c), &kind);
			if (rc < 0)
				return rc;
			if (rc == 2)
				continue;
			w->st->cells++;
			if (rc == 1)
				extent_cell_bad(w, e, g, c, d, kind, path);
		}
	return 0;
}

/* ---- the cells of the layer beside the engine (the cell store, dn_store_side.scrub) ---- */

struct side_walk {
	struct dn_scrub *sc;
	struct dn_scrub_stats *st;
	enum dn_scrub_kind kind; /* the last check's finding */
};

static int
side_check(void *arg, const struct dn_side_file *f)
{
	struct side_walk *w = arg;
	struct dn_store *s = w->sc->o.store;
	int rc;

	if (zc_loop_stopping(&w->sc->loop))
		return -ECANCELED;
	if (f->length == 0 || f->drive >= s->ndrives || !dn_drive_ok(&s->drives[f->drive]))
		return 2; /* nothing to rot, or on a drive nobody reads */
	w->kind = DN_SCRUB_IO;
	rc = check_file(w->sc, f->drive, f->path, f->length, f->chunk, f->crcs, f->ncrc, &w->kind);
	if (rc == 0 || rc == 1)
		w->st->cells++;
	return rc;
}

static void
side_bad(void *arg, const struct dn_side_file *f, int handed)
{
	struct side_walk *w = arg;

	ZC_WARN("scrub",
	        "bad cell id=%016llx group=%u cell=%u drive=%u kind=%s bucket=%s key=%s "
	        "path=%s: %s",
	        (unsigned long long)f->id.extent, f->id.group, f->id.cell, f->drive,
	        kind_word[w->kind], f->bucket ? f->bucket : "", f->key ? f->key : "", f->path,
	        handed == 1 ? "handed to the cluster healer" : "could not hand it over");
	count_bad(w->sc, w->st, w->kind, handed == 1);
}

static int
scrub_side(struct dn_scrub *sc, struct dn_scrub_stats *st)
{
	struct dn_store *s = sc->o.store;
	struct side_walk w = { sc, st, DN_SCRUB_IO };

	if (!s->o.side || !s->o.side->scrub)
		return 0;
	return s->o.side->scrub(s, side_check, side_bad, &w);
}

/* ---- passes and the thread ---- */

int
dn_scrub_pass(struct dn_scrub *sc, struct dn_scrub_stats *st)
{
	struct dn_scrub_stats mine = { 0 };
	struct ext_walk w = { sc, &mine };
	uint64_t t0 = zc_now_ns(), b0 = atomic_load(&sc->bytes);
	int rc = dn_meta_each_extent(sc->o.store->meta, scrub_extent, &w);
	unsigned bad = 0;

	if (!rc)
		rc = scrub_side(sc, &mine);
	mine.bytes = atomic_load(&sc->bytes) - b0; /* one scrubbing thread at a time */
	for (int k = 0; k < DN_SCRUB_KINDS; k++)
		bad += (unsigned)mine.errors[k];
	if (!rc) {
		struct timespec now;

		clock_gettime(CLOCK_REALTIME, &now);
		atomic_store(&sc->pass_ns, zc_now_ns() - t0);
		atomic_store(&sc->last_pass_s, (uint64_t)now.tv_sec);
		atomic_fetch_add(&sc->passes, 1);
		ZC_INFO("scrub", "pass done cells=%llu bytes=%llu bad=%u repaired=%llu s=%.1f",
		        (unsigned long long)mine.cells, (unsigned long long)mine.bytes, bad,
		        (unsigned long long)mine.repaired, (double)(zc_now_ns() - t0) / 1e9);
	}
	if (st) {
		st->cells += mine.cells;
		st->bytes += mine.bytes;
		st->repaired += mine.repaired;
		for (int k = 0; k < DN_SCRUB_KINDS; k++)
			st->errors[k] += mine.errors[k];
	}
	return rc;
}

static void *
run(void *arg)
{
	struct dn_scrub *sc = arg;
	uint64_t first = sc->o.interval_ns < SCRUB_FIRST_NS ? sc->o.interval_ns : SCRUB_FIRST_NS;
	uint64_t next = zc_now_ns() + first;

	if (!sc->o.store->o.heal_interval_ns)
		ZC_WARN("scrub", "--heal-interval 0: bad cells of single-node objects are only "
		                 "marked missing, `zest-datanode heal` rebuilds them");
	for (;;) {
		uint64_t now = zc_now_ns(), t0;
		int rc;

		if (next > now && !zc_loop_wait(&sc->loop, next - now))
			break;
		t0 = zc_now_ns();
		rc = dn_scrub_pass(sc, NULL);
		if (rc == -ECANCELED)
			break;
		if (rc)
			ZC_WARN("scrub", "pass stopped err=%d (%s)", rc, strerror(-rc));
		next = t0 + sc->o.interval_ns;
	}
	return NULL;
}

int
dn_scrub_create(const struct dn_scrub_opts *o, struct dn_scrub **out)
{
	struct dn_scrub *sc;

	if (!o || !o->store || !o->rate_bps || !out)
		return -EINVAL;
	sc = calloc(1, sizeof(*sc));
	if (!sc)
		return -ENOMEM;
	sc->o = *o;
	if (!sc->o.interval_ns)
		sc->o.interval_ns = DN_SCRUB_DEFAULT_INTERVAL;
	zc_loop_init(&sc->loop);
	if (!o->no_thread && zc_loop_start(&sc->loop, "dn-scrub", run, sc)) {
		dn_scrub_destroy(sc);
		return -EAGAIN;
	}
	ZC_INFO("scrub", "rate=%llu B/s interval=%llu s", (unsigned long long)sc->o.rate_bps,
	        (unsigned long long)(sc->o.interval_ns / 1000000000ull));
	*out = sc;
	return 0;
}

void
dn_scrub_stop(struct dn_scrub *sc)
{
	if (sc)
		zc_loop_stop(&sc->loop);
}

void
dn_scrub_destroy(struct dn_scrub *sc)
{
	if (!sc)
		return;
	dn_scrub_stop(sc);
	zc_loop_fini(&sc->loop);
	free(sc->buf);
	free(sc);
}

void
dn_scrub_metrics(struct dn_scrub *sc, FILE *out)
{
	fprintf(out,
	        "# HELP zest_scrub_bytes_total Bytes the scrubber read back and checked.\n"
	        "# TYPE zest_scrub_bytes_total counter\n"
	        "zest_scrub_bytes_total %llu\n"
	        "# HELP zest_scrub_cells_total Cell files the scrubber read back.\n"
	        "# TYPE zest_scrub_cells_total counter\n"
	        "zest_scrub_cells_total %llu\n"
	        "# HELP zest_scrub_errors_total Bad cells the scrubber found: a chunk failing its "
	        "CRC32C, a file of the wrong length, missing, or unreadable.\n"
	        "# TYPE zest_scrub_errors_total counter\n",
	        (unsigned long long)atomic_load(&sc->bytes),
	        (unsigned long long)atomic_load(&sc->cells));
	for (int k = 0; k < DN_SCRUB_KINDS; k++)
		fprintf(out, "zest_scrub_errors_total{kind=\"%s\"} %llu\n", kind_word[k],
		        (unsigned long long)atomic_load(&sc->errors[k]));
	fprintf(out,
	        "# HELP zest_scrub_repairs_total Bad cells the scrubber handed to their healer.\n"
	        "# TYPE zest_scrub_repairs_total counter\n"
	        "zest_scrub_repairs_total %llu\n"
	        "# HELP zest_scrub_passes_total Complete scrub passes.\n"
	        "# TYPE zest_scrub_passes_total counter\n"
	        "zest_scrub_passes_total %llu\n"
	        "# HELP zest_scrub_pass_seconds How long the last complete pass took.\n"
	        "# TYPE zest_scrub_pass_seconds gauge\n"
	        "zest_scrub_pass_seconds %.3f\n"
	        "# HELP zest_scrub_last_pass_timestamp_seconds When the last complete pass ended "
	        "(Unix time; 0: none yet).\n"
	        "# TYPE zest_scrub_last_pass_timestamp_seconds gauge\n"
	        "zest_scrub_last_pass_timestamp_seconds %llu\n",
	        (unsigned long long)atomic_load(&sc->repaired),
	        (unsigned long long)atomic_load(&sc->passes),
	        (double)atomic_load(&sc->pass_ns) / 1e9,
	        (unsigned long long)atomic_load(&sc->last_pass_s));
}
