/*
 * The cell store (cluster mode) on real files through real io_uring rings: cells written
 * from refcounted odd-sized segments at odd addresses and read back byte for byte, names
 * refused twice, corruption caught by the chunk CRCs, pending -> committed, entries that
 * survive a reopen, orphan files swept at open, delete, abort.
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "dn_test.h"
#include "t_fault.h"

#define CELL 16384u
#define SPG  4u

static uint8_t buf[SPG * CELL];

static struct dn_cell_spec
spec_of(uint64_t extent, uint32_t group, unsigned cell, uint64_t length)
{
	return (struct dn_cell_spec){ .id = { extent, group, cell },
		                      .length = length,
		                      .k = 4,
		                      .m = 2,
		                      .cell_size = CELL,
		                      .stripes_per_group = SPG,
		                      .bucket = "bkt",
		                      .key = "some/key" };
}

struct t_cwait {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	int err;
};

static void
cell_cb(void *arg, int err)
{
	struct t_cwait *cw = arg;

	pthread_mutex_lock(&cw->lock);
	cw->err = err;
	cw->done = true;
	pthread_cond_signal(&cw->cond);
	pthread_mutex_unlock(&cw->lock);
}

static int
finish_wait(struct dn_cell_write *w)
{
	struct t_cwait cw = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0 };

	dn_cell_write_finish(w, cell_cb, &cw);
	pthread_mutex_lock(&cw.lock);
	while (!cw.done)
		pthread_cond_wait(&cw.cond, &cw.lock);
	pthread_mutex_unlock(&cw.lock);
	return cw.err;
}

/* One segment: its own slice at an odd address (t_slice), ref held by the caller. */
static struct zc_seg
seg_of(const uint8_t *p, size_t len)
{
	struct t_slice *sl = malloc(sizeof(*sl) + len + 1);

	CHECK(sl);
	zc_ref_init(&sl->ref, t_slice_release);
	memcpy(sl->data, p, len);
	return (struct zc_seg){ sl->data, len, &sl->ref };
}

/* Write buf[0..len) as a cell in random segments of at most max_seg bytes. */
static int
put_cell(struct dn_store *s, const struct dn_cell_spec *sp, const uint8_t *p, size_t len,
         size_t max_seg)
{
	struct dn_cell_write *w;
	size_t at = 0;
	int err = dn_cell_write_open(s, sp, &w);

	if (err)
		return err;
	while (at < len) {
		struct zc_seg segs[8];
		unsigned n = 0, want = 1 + (unsigned)(t_rand() % 8);
		size_t start = at;

		while (n < want && at < len) {
			size_t l = 1 + t_rand() % max_seg;

			if (l > len - at)
				l = len - at;
			segs[n++] = seg_of(p + at, l);
			at += l;
		}
		err = dn_cell_write_data(w, start, segs, n);
		for (unsigned i = 0; i < n; i++)
			zc_ref_put(segs[i].ref);
		if (err) {
			dn_cell_write_abort(w);
			return err;
		}
	}
	return finish_wait(w);
}

static int
check_cell(struct dn_store *s, struct dn_cell_id id, uint64_t off, uint64_t len, bool has_len,
           const uint8_t *want, size_t want_len)
{
	struct t_read r = { NULL, 0, 0, off };
	int err = dn_cell_read(s, id, off, len, has_len, t_read_cb, &r);

	if (!err) {
		CHECK_EQ(r.len, want_len);
		CHECK(want_len == 0 || memcmp(r.buf, want, want_len) == 0);
	}
	free(r.buf);
	return err;
}

static void
cell_path(struct t_env *e, struct dn_cell_id id, unsigned drive, char *path, size_t n)
{
	snprintf(path, n, "%s/data/%02x/%016llx.%u.%u", e->dirs[drive],
	         (unsigned)(id.extent & 0xff), (unsigned long long)id.extent, id.group, id.cell);
}

static bool
exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

static uint64_t
now_real(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void
test_roundtrip(struct t_env *e)
{
	const uint64_t lens[] = { 0, 1, CELL - 1, CELL, CELL + 1, SPG * CELL - 3, SPG * CELL };

	for (unsigned i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		struct dn_cell_spec sp = spec_of(0xabcdef0000000000ull + i, 7, i % 6, lens[i]);
		struct dn_cell_info info;

		/* Segments of up to 5000 bytes (odd sizes), and single bytes for the short. */
		CHECK_EQ(put_cell(e->s, &sp, buf, lens[i], lens[i] < 100 ? 1 : 5000), 0);
		CHECK_EQ(check_cell(e->s, sp.id, 0, 0, false, buf, lens[i]), 0);
		CHECK_EQ(dn_cell_stat(e->s, sp.id, &info), 0);
		CHECK_EQ(info.length, lens[i]);
		CHECK(info.pending);
		CHECK_EQ(info.k, 4);
		CHECK_EQ(info.m, 2);
		CHECK_EQ(info.cell_size, CELL);
		CHECK_EQ(info.stripes_per_group, SPG);
		CHECK_EQ(strcmp(info.bucket, "bkt"), 0);
		CHECK_EQ(strcmp(info.key, "some/key"), 0);
		CHECK(info.drive < e->n);
		dn_cell_info_fini(&info);
	}
	/* Ranges inside the last one, across chunk and window edges. */
	{
		struct dn_cell_id id = { 0xabcdef0000000006ull, 7, 0 };

		CHECK_EQ(check_cell(e->s, id, 5000, 10000, true, buf + 5000, 10000), 0);
		CHECK_EQ(check_cell(e->s, id, 4096, 4096, true, buf + 4096, 4096), 0);
		CHECK_EQ(check_cell(e->s, id, SPG * CELL - 1, 1, true, buf + SPG * CELL - 1, 1), 0);
		CHECK_EQ(check_cell(e->s, id, SPG * CELL, 0, true, NULL, 0), 0);
		CHECK_EQ(check_cell(e->s, id, 100, 0, false, buf + 100, SPG * CELL - 100), 0);
		CHECK_EQ(check_cell(e->s, id, SPG * CELL, 1, true, NULL, 0), -EINVAL);
		CHECK_EQ(check_cell(e->s, id, SPG * CELL + 1, 0, false, NULL, 0), -EINVAL);
	}
	/* One span per byte for a while: 64 iovecs per SQE, many SQEs. */
	{
		struct dn_cell_spec sp = spec_of(0x77, 0, 1, 1000);

		CHECK_EQ(put_cell(e->s, &sp, buf, 1000, 1), 0);
		CHECK_EQ(check_cell(e->s, sp.id, 0, 0, false, buf, 1000), 0);
	}
}

/* The SQEs write from the caller's segments: they hold refs on them, no copy is taken. */
static void
test_zero_copy(struct t_env *e)
{
	struct dn_cell_spec sp = spec_of(0x2c0b1, 3, 2, 3 * 1000);
	struct dn_cell_write *w;
	struct zc_seg segs[3];

	for (unsigned d = 0; d < e->n; d++)
		t_fault_delay_idx(ZC_FP_DRIVE_WRITE, d, 50 * 1000000ull);
	CHECK_EQ(dn_cell_write_open(e->s, &sp, &w), 0);
	for (unsigned i = 0; i < 3; i++)
		segs[i] = seg_of(buf + 1000 * i, 1000);
	CHECK_EQ(dn_cell_write_data(w, 0, segs, 3), 0);
	/* The write holds its own reference on every segment it was given. */
	for (unsigned i = 0; i < 3; i++)
		CHECK_EQ(atomic_load(&segs[i].ref->refs), 2);
	CHECK_EQ(finish_wait(w), 0);
	for (unsigned i = 0; i < 3; i++) {
		CHECK_EQ(atomic_load(&segs[i].ref->refs), 1); /* given back at completion */
		zc_ref_put(segs[i].ref);
	}
	for (unsigned d = 0; d < e->n; d++)
		t_fault_delay_idx(ZC_FP_DRIVE_WRITE, d, 0);
	CHECK_EQ(check_cell(e->s, sp.id, 0, 0, false, buf, 3000), 0);
}

static void
test_exists(struct t_env *e)
{
	struct dn_cell_spec sp = spec_of(0xe1, 0, 0, 100);
	struct dn_cell_write *w, *w2;
	struct dn_cell_info *v;
	struct dn_counters k0, k1;
	size_t n;
	int err;

	dn_counters_get(e->s, &k0);
	CHECK_EQ(put_cell(e->s, &sp, buf, 100, 30), 0);
	CHECK_EQ(dn_cell_write_open(e->s, &sp, &w), ZC_E(ZC_CELL_EXISTS));
	CHECK_EQ(put_cell(e->s, &sp, buf, 100, 30), ZC_E(ZC_CELL_EXISTS));
	CHECK_EQ(check_cell(e->s, sp.id, 0, 0, false, buf, 100), 0);
	/* Another cell of the same extent and group is its own name. */
	sp.id.cell = 1;
	CHECK_EQ(dn_cell_write_open(e->s, &sp, &w), 0);
	/* A name being written is busy, until its abort finished. */
	CHECK_EQ(dn_cell_write_open(e->s, &sp, &w2), -EBUSY);
	dn_cell_write_abort(w);
	for (int i = 0; (err = dn_cell_write_open(e->s, &sp, &w2)) == -EBUSY && i < 60000; i++)
		usleep(1000);
	CHECK_EQ(err, 0);
	dn_cell_write_abort(w2);
	for (int i = 0; (err = put_cell(e->s, &sp, buf + 1, 100, 7)) == -EBUSY && i < 60000; i++)
		usleep(1000);
	CHECK_EQ(err, 0);
	CHECK_EQ(check_cell(e->s, sp.id, 0, 0, false, buf + 1, 100), 0);
	/* each abort removed the file its open created, counted (the name was busy until) */
	dn_counters_get(e->s, &k1);
	CHECK_EQ(k1.cells_swept_failed - k0.cells_swept_failed, 2);
	CHECK_EQ(k1.cells_swept_open, k0.cells_swept_open);
	/* Bad specs. */
	sp = spec_of(0xe2, 0, 6, 10);
	CHECK_EQ(dn_cell_write_open(e->s, &sp, &w), -EINVAL); /* cell >= k + m */
	sp = spec_of(0xe2, 0, 0, SPG * CELL + 1);
	CHECK_EQ(dn_cell_write_open(e->s, &sp, &w), -EINVAL);
	sp = spec_of(0xe2, 0, 0, 10);
	sp.cell_size = 6000;
	CHECK_EQ(dn_cell_write_open(e->s, &sp, &w), -EINVAL);
	sp = spec_of(0xe2, 0, 0, 10);
	sp.bucket = "";
	CHECK_EQ(dn_cell_write_open(e->s, &sp, &w), -EINVAL);
	/* Bytes past the declared length; and too few at finish: nothing recorded. */
	sp = spec_of(0xe2, 0, 0, 10);
	CHECK_EQ(dn_cell_write_open(e->s, &sp, &w), 0);
	{
		struct zc_seg s1 = seg_of(buf, 11), s2 = seg_of(buf, 5);

		CHECK_EQ(dn_cell_write_data(w, 0, &s1, 1), -EINVAL);
		CHECK_EQ(dn_cell_write_data(w, 1, &s2, 1), -EINVAL); /* offset */
		CHECK_EQ(dn_cell_write_data(w, 0, &s2, 1), 0);
		zc_ref_put(s1.ref);
		zc_ref_put(s2.ref);
	}
	CHECK_EQ(finish_wait(w), -EINVAL); /* the callback came after the file was removed */
	CHECK_EQ(dn_cell_read(e->s, sp.id, 0, 0, false, t_read_cb, NULL), ZC_E(ZC_NO_KEY));
	CHECK_EQ(dn_cell_list_pending_older(e->s, now_real() + 1, 0, &v, &n), 0);
	for (size_t i = 0; i < n; i++)
		CHECK(v[i].id.extent != 0xe2);
	dn_cell_list_free(v, n);
	/* The failed name is free again. */
	CHECK_EQ(put_cell(e->s, &sp, buf, 10, 3), 0);
}

static void
test_corrupt(struct t_env *e)
{
	struct dn_cell_spec sp = spec_of(0xbad, 1, 4, 3 * 4096 + 17);
	struct dn_cell_info info;
	char path[PATH_MAX];
	uint8_t b;
	int fd;

	CHECK_EQ(put_cell(e->s, &sp, buf, sp.length, 999), 0);
	CHECK_EQ(dn_cell_stat(e->s, sp.id, &info), 0);
	cell_path(e, sp.id, info.drive, path, sizeof(path));
	dn_cell_info_fini(&info);
	fd = open(path, O_RDWR);
	CHECK(fd >= 0);
	CHECK_EQ(pread(fd, &b, 1, 4096 + 5), 1);
	b ^= 0x40;
	CHECK_EQ(pwrite(fd, &b, 1, 4096 + 5), 1);
	close(fd);
	CHECK_EQ(check_cell(e->s, sp.id, 0, 0, false, buf, sp.length), -EBADMSG);
	CHECK_EQ(check_cell(e->s, sp.id, 4096, 1, true, NULL, 0), -EBADMSG);
	/* The chunks around it are fine. */
	CHECK_EQ(check_cell(e->s, sp.id, 0, 4096, true, buf, 4096), 0);
	CHECK_EQ(check_cell(e->s, sp.id, 8192, 4096 + 17, true, buf + 8192, 4096 + 17), 0);
	/* A short file is a bad cell too. */
	CHECK_EQ(truncate(path, 100), 0);
	CHECK_EQ(check_cell(e->s, sp.id, 0, 0, false, buf, sp.length), -EBADMSG);
	CHECK_EQ(unlink(path), 0);
	CHECK_EQ(check_cell(e->s, sp.id, 0, 0, false, buf, sp.length), -EBADMSG);
	CHECK_EQ(dn_cell_delete(e->s, sp.id), 1);
}

static bool
listed(struct dn_store *s, uint64_t than, struct dn_cell_id id)
{
	struct dn_cell_info *v;
	bool found = false;
	size_t n;

	CHECK_EQ(dn_cell_list_pending_older(s, than, 0, &v, &n), 0);
	for (size_t i = 0; i < n; i++) {
		CHECK(v[i].pending);
		if (v[i].id.extent == id.extent && v[i].id.group == id.group &&
		    v[i].id.cell == id.cell) {
			CHECK_EQ(strcmp(v[i].key, "some/key"), 0);
			found = true;
		}
	}
	dn_cell_list_free(v, n);
	return found;
}

static void
test_commit_restart_orphans(struct t_env *e)
{
	struct dn_cell_spec pend = spec_of(0x5e11, 2, 3, 20000), done = spec_of(0xd0e, 0, 5, 3000);
	struct dn_cell_id gone = { 0x0f0f0f0f0f0f0f0full, 9, 2 };
	struct dn_cell_info info;
	char orphan[PATH_MAX], misplaced[PATH_MAX], path[PATH_MAX];
	unsigned pend_drive;
	uint64_t before;
	int fd;

	before = now_real();
	CHECK_EQ(put_cell(e->s, &pend, buf, pend.length, 3333), 0);
	CHECK_EQ(put_cell(e->s, &done, buf + 7, done.length, 100), 0);
	CHECK(!listed(e->s, before, pend.id)); /* not older than that */
	CHECK(listed(e->s, now_real() + 1, pend.id));
	CHECK(listed(e->s, now_real() + 1, done.id));
	CHECK_EQ(dn_cell_commit(e->s, done.id), 0);
	CHECK_EQ(dn_cell_commit(e->s, done.id), 0); /* repeated */
	CHECK(!listed(e->s, now_real() + 1, done.id));
	CHECK_EQ(dn_cell_stat(e->s, done.id, &info), 0);
	CHECK(!info.pending);
	dn_cell_info_fini(&info);
	CHECK_EQ(dn_cell_commit(e->s, gone), ZC_E(ZC_NO_KEY));
	CHECK_EQ(dn_cell_stat(e->s, pend.id, &info), 0);
	pend_drive = info.drive;
	dn_cell_info_fini(&info);
	t_close(e);

	/* What a crash between a cell's fdatasync and its entry leaves: a file no entry
	 * names; and a file under a recorded name on a drive its entry does not name. */
	snprintf(path, sizeof(path), "%s/data/0f", e->dirs[1]);
	mkdir(path, 0755);
	cell_path(e, gone, 1, orphan, sizeof(orphan));
	fd = open(orphan, O_WRONLY | O_CREAT, 0644);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, buf, 1234), 1234);
	close(fd);
	cell_path(e, pend.id, (pend_drive + 1) % e->n, misplaced, sizeof(misplaced));
	snprintf(path, sizeof(path), "%s/data/11", e->dirs[(pend_drive + 1) % e->n]);
	mkdir(path, 0755);
	fd = open(misplaced, O_WRONLY | O_CREAT, 0644);
	CHECK(fd >= 0);
	close(fd);

	t_open(e);
	CHECK(!exists(orphan));
	CHECK(!exists(misplaced));
	cell_path(e, pend.id, pend_drive, path, sizeof(path));
	CHECK(exists(path));
	/* The pending entry survived, and still reads; the committed one stays committed. */
	CHECK_EQ(dn_cell_stat(e->s, pend.id, &info), 0);
	CHECK(info.pending);
	CHECK_EQ(info.drive, pend_drive);
	CHECK(info.created_ns >= before);
	dn_cell_info_fini(&info);
	CHECK(listed(e->s, now_real() + 1, pend.id));
	CHECK(!listed(e->s, now_real() + 1, done.id));
	CHECK_EQ(check_cell(e->s, pend.id, 0, 0, false, buf, pend.length), 0);
	CHECK_EQ(check_cell(e->s, done.id, 0, 0, false, buf + 7, done.length), 0);
	CHECK_EQ(dn_cell_commit(e->s, pend.id), 0);
	CHECK(!listed(e->s, now_real() + 1, pend.id));

	/* Delete: entry and file gone, a second delete finds nothing. */
	CHECK_EQ(dn_cell_delete(e->s, pend.id), 1);
	CHECK(!exists(path));
	CHECK_EQ(dn_cell_stat(e->s, pend.id, &info), ZC_E(ZC_NO_KEY));
	CHECK_EQ(check_cell(e->s, pend.id, 0, 0, false, NULL, 0), ZC_E(ZC_NO_KEY));
	CHECK_EQ(dn_cell_delete(e->s, pend.id), 0);
	/* The name can be written again. */
	CHECK_EQ(put_cell(e->s, &pend, buf + 3, 500, 64), -EINVAL); /* length 20000 declared */
	pend.length = 500;
	CHECK_EQ(put_cell(e->s, &pend, buf + 3, 500, 64), 0);
	CHECK_EQ(check_cell(e->s, pend.id, 0, 0, false, buf + 3, 500), 0);
}

/* Retired in the list of retired cells last touched before than? */
static bool
retired_listed(struct dn_store *s, uint64_t than, struct dn_cell_id id)
{
	struct dn_cell_info *v;
	size_t n;
	bool found = false;

	CHECK_EQ(dn_cell_list_retired_older(s, than, 0, &v, &n), 0);
	for (size_t i = 0; i < n; i++)
		found |= v[i].id.extent == id.extent && v[i].id.group == id.group &&
		         v[i].id.cell == id.cell;
	dn_cell_list_free(v, n);
	return found;
}

/* Retire (a DeleteCells, the collector's "not named"): a pending cell goes at once, a
 * committed one stays readable, retired, listed by its touch time, through a restart; a
 * touch moves that time; the collector's conditional delete removes it only as listed; a
 * new write of a retired name replaces it. */
static void
test_retire(struct t_env *e)
{
	struct dn_cell_spec pend = spec_of(0x7e71, 0, 1, 5000), done = spec_of(0x7e72, 1, 2, 9000);
	struct dn_cell_info a, b;
	char path[PATH_MAX];
	uint64_t t0;

	CHECK_EQ(put_cell(e->s, &pend, buf, pend.length, 1000), 0);
	CHECK_EQ(put_cell(e->s, &done, buf + 5, done.length, 777), 0);
	CHECK_EQ(dn_cell_commit(e->s, done.id), 0);
	CHECK_EQ(dn_cell_retire(e->s, pend.id), 1);
	CHECK_EQ(dn_cell_stat(e->s, pend.id, &a), ZC_E(ZC_NO_KEY));
	t0 = now_real();
	CHECK_EQ(dn_cell_retire(e->s, done.id), 1);
	CHECK_EQ(dn_cell_stat(e->s, done.id, &a), 0);
	CHECK(a.retired && !a.pending && a.touched_ns >= t0);
	CHECK(!listed(e->s, now_real() + 1, done.id)); /* not a pending cell */
	CHECK(!retired_listed(e->s, a.touched_ns, done.id));
	CHECK(retired_listed(e->s, a.touched_ns + 1, done.id));
	CHECK_EQ(check_cell(e->s, done.id, 0, 0, false, buf + 5, done.length), 0);
	{
		/* a read of one retired cell of an extent refreshes the extent's other retired
		 * cells on this node too (a GET reads them later); other extents' stay */
		struct dn_cell_spec sib = spec_of(0x7e72, 0, 0, 3000),
		                    other = spec_of(0x7e73, 0, 0, 100);
		struct dn_cell_info x;
		uint64_t old = now_real() - 100000000000ull;

		CHECK_EQ(put_cell(e->s, &sib, buf, sib.length, 999), 0);
		CHECK_EQ(put_cell(e->s, &other, buf, other.length, 99), 0);
		CHECK_EQ(dn_cell_commit(e->s, sib.id), 0);
		CHECK_EQ(dn_cell_commit(e->s, other.id), 0);
		CHECK_EQ(dn_cell_retire(e->s, sib.id), 1);
		CHECK_EQ(dn_cell_retire(e->s, other.id), 1);
		CHECK_EQ(dn_meta_cell_touch(e->s->meta, sib.id, false, old), 1);
		CHECK_EQ(dn_meta_cell_touch(e->s->meta, other.id, false, old), 1);
		CHECK_EQ(dn_meta_cell_touch(e->s->meta, done.id, false, old), 1);
		CHECK(retired_listed(e->s, now_real() - 1000000000ull, sib.id));
		CHECK_EQ(check_cell(e->s, done.id, 0, 0, false, buf + 5, done.length), 0);
		CHECK(!retired_listed(e->s, now_real() - 1000000000ull, sib.id));
		CHECK(!retired_listed(e->s, now_real() - 1000000000ull, done.id));
		CHECK(retired_listed(e->s, now_real() - 1000000000ull, other.id));
		CHECK_EQ(dn_cell_stat(e->s, done.id, &x), 0);
		a.touched_ns = x.touched_ns; /* the read's touch is done's time from here */
		dn_cell_info_fini(&x);
		CHECK_EQ(dn_cell_delete(e->s, sib.id), 1);
		CHECK_EQ(dn_cell_delete(e->s, other.id), 1);
	}
	CHECK_EQ(dn_cell_retire(e->s, done.id), 1); /* repeated: the first time stays */
	CHECK_EQ(dn_cell_commit(e->s, done.id), 0); /* a late CommitCells: still retired */
	t_close(e);
	t_open(e);
	CHECK_EQ(dn_cell_stat(e->s, done.id, &b), 0);
	CHECK(b.retired && !b.pending);
	CHECK_EQ(b.touched_ns, a.touched_ns);
	CHECK_EQ(b.created_ns, a.created_ns);
	dn_cell_info_fini(&b);
	cell_path(e, done.id, a.drive, path, sizeof(path));
	CHECK(exists(path)); /* the restart sweep keeps a retired cell's file */
	CHECK_EQ(dn_cell_touch(e->s, done.id), 0);
	CHECK_EQ(dn_cell_stat(e->s, done.id, &b), 0);
	CHECK(b.touched_ns >= a.touched_ns);
	/* as listed before the touch: kept; as it is now: deleted with its file */
	if (b.touched_ns != a.touched_ns) {
		CHECK_EQ(dn_cell_delete_if(e->s, &a), 0);
		CHECK(exists(path));
	}
	dn_cell_info_fini(&a);
	/* a write of the retired name (a heal of the same extent) replaces it */
	CHECK_EQ(put_cell(e->s, &done, buf + 9, done.length, 500), 0);
	CHECK_EQ(dn_cell_stat(e->s, done.id, &a), 0);
	CHECK(!a.retired && a.pending && a.touched_ns == 0);
	CHECK_EQ(check_cell(e->s, done.id, 0, 0, false, buf + 9, done.length), 0);
	CHECK_EQ(dn_cell_delete_if(e->s, &b), 0); /* the old entry's listing: not this one */
	dn_cell_info_fini(&b);
	cell_path(e, done.id, a.drive, path, sizeof(path));
	CHECK(exists(path));
	CHECK_EQ(dn_cell_delete_if(e->s, &a), 1);
	CHECK(!exists(path));
	dn_cell_info_fini(&a);
	CHECK_EQ(dn_cell_touch(e->s, done.id), ZC_E(ZC_NO_KEY));
}

/* An object beside the cells (written first: its files are the only ones): the sweep keeps
 * them, and its extent id is refused as a cell's. */
static void
test_with_objects(struct t_env *e)
{
	struct dn_cell_spec sp;
	struct dn_cell_write *w;
	unsigned before;
	FILE *p;
	char cmd[512];
	unsigned long long id = 0;

	CHECK_EQ(dn_bucket_create(e->s, "b", NULL), 0);
	CHECK_EQ(t_put(e->s, "b", "obj", buf, 50000), 0);
	snprintf(cmd, sizeof(cmd), "find %s -path '*/data/*' -type f -printf '%%f\\n' | head -1",
	         e->root);
	p = popen(cmd, "r");
	CHECK(p && fscanf(p, "%16llx", &id) == 1);
	pclose(p);
	sp = spec_of(id, 0, 0, 10);
	CHECK_EQ(dn_cell_write_open(e->s, &sp, &w), ZC_E(ZC_CELL_EXISTS));
	before = t_count_files(e);
	t_close(e);
	t_open(e);
	CHECK_EQ(t_count_files(e), before);
	CHECK_EQ(t_check_read(e->s, "b", "obj", 0, 0, false, buf, 50000), 0);
}

/*
 * A real crash: a process killed (SIGKILL) with one cell recorded and one written but not
 * finished. After the restart the recorded one is there, pending; the other's file is gone.
 */
static void
test_crash(struct t_env *e)
{
	struct dn_cell_spec rec = spec_of(0xc4a5, 0, 0, 9000), half = spec_of(0xc4a6, 1, 1, 30000);
	struct dn_cell_info info;
	struct dn_counters k;
	unsigned files;
	pid_t pid;
	int st;

	t_close(e);
	files = t_count_files(e);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct dn_cell_write *w;
		struct zc_seg seg;

		t_open(e);
		CHECK_EQ(put_cell(e->s, &rec, buf, rec.length, 2000), 0);
		CHECK_EQ(dn_cell_write_open(e->s, &half, &w), 0);
		seg = seg_of(buf, 20000);
		CHECK_EQ(dn_cell_write_data(w, 0, &seg, 1), 0);
		CHECK_EQ(dn_cell_write_data(w, 20000, &seg, 0), 0);
		usleep(200000); /* let the ring write what it has */
		raise(SIGKILL);
		_exit(1);
	}
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	CHECK_EQ(t_count_files(e), files + 2);
	t_open(e);
	CHECK_EQ(t_count_files(e), files + 1);
	dn_counters_get(e->s, &k);
	CHECK_EQ(k.cells_swept_open, 1); /* the half-written one, by the sweep at open */
	CHECK_EQ(dn_cell_stat(e->s, half.id, &info), ZC_E(ZC_NO_KEY));
	CHECK_EQ(dn_cell_stat(e->s, rec.id, &info), 0);
	CHECK(info.pending);
	dn_cell_info_fini(&info);
	CHECK_EQ(check_cell(e->s, rec.id, 0, 0, false, buf, rec.length), 0);
	CHECK_EQ(put_cell(e->s, &half, buf, half.length, 4000), 0);
	CHECK_EQ(check_cell(e->s, half.id, 0, 0, false, buf, half.length), 0);
}

/* A write error on the ring fails the cell (nothing recorded, file gone) and the drive; the
 * cells on a failed drive read as -EIO; new cells avoid it; no drive left: ZC_E(ZC_NO_QUORUM). */
static void
test_failures(struct t_env *e)
{
	struct dn_cell_spec sp = spec_of(0xf00, 0, 0, 5000);
	struct dn_cell_write *w;
	struct dn_cell_info *v, info;
	unsigned files = t_count_files(e), failed = e->n;
	size_t n;

	for (unsigned d = 0; d < e->n; d++)
		t_fault_err_idx(ZC_FP_DRIVE_WRITE, d, -EIO, 1);
	CHECK_EQ(put_cell(e->s, &sp, buf, sp.length, 700), -EIO);
	CHECK_EQ(dn_cell_stat(e->s, sp.id, &info), ZC_E(ZC_NO_KEY));
	CHECK_EQ(t_count_files(e), files);
	for (unsigned d = 0; d < e->n; d++) {
		t_fault_err_idx(ZC_FP_DRIVE_WRITE, d, -EIO, 0);
		if (dn_drive_state_get(e->s, d) == DN_DRIVE_FAILED) {
			CHECK_EQ(failed, e->n);
			failed = d;
		}
	}
	CHECK(failed < e->n);
	CHECK_EQ(dn_cell_list_pending_older(e->s, now_real() + 1, 0, &v, &n), 0);
	for (size_t i = 0; i < n; i++)
		if (v[i].drive == failed)
			CHECK_EQ(dn_cell_read(e->s, v[i].id, 0, 0, false, t_read_cb, NULL), -EIO);
	dn_cell_list_free(v, n);
	for (unsigned i = 0; i < 8; i++) {
		sp.id.group = i;
		CHECK_EQ(put_cell(e->s, &sp, buf, sp.length, 700), 0);
		CHECK_EQ(dn_cell_stat(e->s, sp.id, &info), 0);
		CHECK(info.drive != failed);
		dn_cell_info_fini(&info);
	}
	for (unsigned d = 0; d < e->n; d++)
		dn_drive_fail(e->s, d);
	sp.id.group = 100;
	CHECK_EQ(dn_cell_write_open(e->s, &sp, &w), ZC_E(ZC_NO_QUORUM));
}

/*
 * A drive folder back empty (its disk replaced while the node was down) in a store that
 * exists: open takes it in as the same drive, drops every cell entry on it (the files went
 * with it) and says the store lost cells (dn_store_lost_at_open), so that the node's
 * cluster healer checks the store against the records; the other drives' cells stay and
 * read back. The next open has nothing to say.
 */
static void
test_emptied_drive(struct t_env *e)
{
	unsigned on[3] = { 0 }, gone;
	struct dn_cell_info info;
	char path[PATH_MAX];

	CHECK(!dn_store_lost_at_open(e->s));
	for (unsigned i = 0; i < 9; i++) {
		struct dn_cell_spec sp = spec_of(0xe3e3, i, 0, 4000 + i);

		CHECK_EQ(put_cell(e->s, &sp, buf + i, sp.length, 900), 0);
		CHECK_EQ(dn_cell_commit(e->s, sp.id), 0);
		CHECK_EQ(dn_cell_stat(e->s, sp.id, &info), 0);
		on[info.drive]++;
		dn_cell_info_fini(&info);
	}
	gone = on[0] ? 0 : on[1] ? 1 : 2;
	t_close(e);
	t_rmrf(e->dirs[gone]);
	CHECK_EQ(mkdir(e->dirs[gone], 0755), 0);
	t_open(e);
	CHECK(dn_store_lost_at_open(e->s));
	snprintf(path, sizeof(path), "%s/zest-drive", e->dirs[gone]);
	CHECK_EQ(access(path, F_OK), 0);
	for (unsigned i = 0; i < 9; i++) {
		struct dn_cell_spec sp = spec_of(0xe3e3, i, 0, 4000 + i);
		int rc = dn_cell_stat(e->s, sp.id, &info);

		if (rc == ZC_E(ZC_NO_KEY)) {
			on[gone]--;
			continue;
		}
		CHECK_EQ(rc, 0);
		CHECK(info.drive != gone);
		dn_cell_info_fini(&info);
		CHECK_EQ(check_cell(e->s, sp.id, 0, 0, false, buf + i, sp.length), 0);
		CHECK_EQ(dn_cell_delete(e->s, sp.id), 1);
	}
	CHECK_EQ(on[gone], 0); /* exactly the emptied drive's cells went */
	t_close(e);
	t_open(e);
	CHECK(!dn_store_lost_at_open(e->s));
}

int
main(void)
{
	struct t_env e;

	t_fill(buf, sizeof(buf));
	t_env_init(&e, 3, 1, 1);
	e.o.cell_size = CELL;
	e.o.stripes_per_group = SPG;
	t_open(&e);
	test_with_objects(&e);
	test_roundtrip(&e);
	test_zero_copy(&e);
	test_exists(&e);
	test_corrupt(&e);
	test_commit_restart_orphans(&e);
	test_retire(&e);
	test_crash(&e);
	test_emptied_drive(&e);
	/* The object came through the restarts' sweeps whole. */
	CHECK_EQ(t_check_read(e.s, "b", "obj", 0, 0, false, buf, 50000), 0);
	CHECK_EQ(dn_delete(e.s, "b", "obj"), 1);
	test_failures(&e); /* last: it fails every drive */
	t_env_fini(&e);
	printf("ok\n");
	return 0;
}
