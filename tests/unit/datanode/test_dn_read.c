/*
 * Reads under failure: up to m drive folders removed, a corrupted chunk, a drive marked
 * failed during writes (quorum), and heal rebuilding a replaced drive folder.
 */
#include <fcntl.h>
#include <sys/stat.h>

#include "dn_test.h"
#include "t_fault.h"
#include "dn_internal.h"

#define NOBJ 4

static uint8_t *bufs[NOBJ];
static size_t lens[NOBJ];

static void
put_all(struct t_env *e)
{
	size_t group = e->o.cell_size * e->o.k * e->o.stripes_per_group;
	size_t sizes[NOBJ] = { 1, e->o.cell_size + 1, 2 * group + 4097, 7 * e->o.cell_size - 3 };

	for (int i = 0; i < NOBJ; i++) {
		char key[16];

		lens[i] = sizes[i];
		bufs[i] = malloc(lens[i]);
		t_fill(bufs[i], lens[i]);
		snprintf(key, sizeof(key), "o%d", i);
		CHECK_EQ(t_put(e->s, "b", key, bufs[i], lens[i]), 0);
	}
}

static void
check_all(struct t_env *e)
{
	for (int i = 0; i < NOBJ; i++) {
		char key[16];

		snprintf(key, sizeof(key), "o%d", i);
		CHECK_EQ(t_check_read(e->s, "b", key, 0, 0, false, bufs[i], lens[i]), 0);
		CHECK_EQ(t_check_read(e->s, "b", key, lens[i] / 3, lens[i] / 2, true,
		                      bufs[i] + lens[i] / 3, lens[i] / 2),
		         0);
	}
}

static void
free_all(void)
{
	for (int i = 0; i < NOBJ; i++)
		free(bufs[i]);
}

static uint64_t
degraded(struct dn_store *s)
{
	struct dn_counters c;

	dn_counters_get(s, &c);
	return c.degraded_reads;
}

/* Flip one byte in the first cell file found on drive d. */
static void
corrupt_one(struct t_env *e, unsigned d)
{
	char cmd[600], path[512] = "";
	FILE *p;
	int fd;
	uint8_t b;

	snprintf(cmd, sizeof(cmd), "find %s/data -type f -size +1 | sort | head -1", e->dirs[d]);
	p = popen(cmd, "r");
	CHECK(p && fgets(path, sizeof(path), p));
	pclose(p);
	path[strcspn(path, "\n")] = 0;
	fd = open(path, O_RDWR);
	CHECK(fd >= 0);
	CHECK_EQ(pread(fd, &b, 1, 0), 1);
	b ^= 0x5a;
	CHECK_EQ(pwrite(fd, &b, 1, 0), 1);
	close(fd);
}

static void
missing_drives(void)
{
	struct t_env e;
	uint64_t before;

	t_env_open(&e, 7, 4, 2, "b");
	put_all(&e);
	check_all(&e);
	CHECK_EQ(degraded(e.s), 0);
	t_close(&e);

	/* Lose m = 2 drive folders, both holding metadata replicas. */
	t_rmrf(e.dirs[0]);
	t_rmrf(e.dirs[2]);
	t_open(&e);
	check_all(&e);
	CHECK(degraded(e.s) > 0);
	/* The replaced folders are rebuilt; then two other drives may go. */
	CHECK(dn_heal(e.s, 0) > 0);
	CHECK(dn_heal(e.s, 2) > 0);
	CHECK_EQ(dn_heal(e.s, 0), 0); /* nothing left to do */
	t_close(&e);
	t_rmrf(e.dirs[1]);
	t_rmrf(e.dirs[5]);
	t_open(&e);
	check_all(&e);
	t_close(&e);

	/* m + 1 = 3 folders gone: objects that had cells there cannot be rebuilt. */
	t_rmrf(e.dirs[1]);
	t_rmrf(e.dirs[3]);
	t_rmrf(e.dirs[4]);
	t_open(&e);
	{
		struct t_read r = { NULL, 0, 0, 0 };
		int err = dn_read(e.s, "b", "o2", 0, 0, false, NULL, t_read_cb, &r);

		CHECK(err == ZC_E(ZC_NO_KEY) || err == -EIO || err == -EBADMSG);
		free(r.buf);
	}
	before = degraded(e.s);
	(void)before;
	t_env_fini(&e);
	free_all();
}

/* Chunk CRC failures seen by reads, over all drives. */
static uint64_t
mismatches(struct dn_store *s)
{
	uint64_t n = 0;

	for (unsigned d = 0; d < s->ndrives; d++)
		n += atomic_load(&s->drives[d].crc_mismatches);
	return n;
}

static void
corrupted_cell(void)
{
	struct t_env e;

	t_env_open(&e, 6, 4, 2, "b");
	put_all(&e);
	for (unsigned d = 0; d < 6; d++)
		corrupt_one(&e, d); /* one bad chunk per drive, in different stripes or not */
	CHECK_EQ(mismatches(e.s), 0);
	check_all(&e);
	CHECK(degraded(e.s) > 0);
	/* Counted on their own, by drive (zest_checksum_mismatches_total{drive}). */
	CHECK(mismatches(e.s) > 0);
	CHECK(mismatches(e.s) <= degraded(e.s) * 6);
	/* Heal rewrites the bad cells in place. */
	for (unsigned d = 0; d < 6; d++)
		CHECK(dn_heal(e.s, d) >= 0);
	{
		uint64_t d0 = degraded(e.s), m0 = mismatches(e.s);
		char *text = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&text, &len);

		check_all(&e);
		CHECK_EQ(degraded(e.s), d0);
		CHECK_EQ(mismatches(e.s), m0);
		CHECK(f);
		dn_metrics_render(e.s, f);
		fclose(f);
		CHECK(strstr(text, "# TYPE zest_checksum_mismatches_total counter\n"));
		CHECK(strstr(text, "zest_checksum_mismatches_total{drive=\"5\"} "));
		free(text);
	}
	t_env_fini(&e);
	free_all();
}

static void
quorum(void)
{
	struct t_env e;
	uint8_t buf[70000];
	struct dn_write *w;
	int err;

	t_fill(buf, sizeof(buf));
	t_env_open(&e, 6, 4, 2, "b");
	CHECK_EQ(dn_drive_fail(e.s, 3), 0);
	CHECK_EQ(dn_drive_state_get(e.s, 3), DN_DRIVE_FAILED);
	/* 5 of 6 cells durable: quorum k + 1 holds; the missing cell is recorded. */
	CHECK_EQ(t_put(e.s, "b", "q1", buf, sizeof(buf)), 0);
	CHECK_EQ(t_check_read(e.s, "b", "q1", 0, 0, false, buf, sizeof(buf)), 0);
	/* Drive 4 dies during a write: 4 of 6 cells, below quorum: it fails, nothing shows. */
	t_fault_err_idx(ZC_FP_DRIVE_WRITE, 4, -EIO, 1);
	err = t_feed(e.s, "b", "q2", buf, sizeof(buf), 3000, true, &w);
	CHECK_EQ(err, 0);
	CHECK_EQ(t_commit(w, "x", NULL), ZC_E(ZC_NO_QUORUM));
	CHECK_EQ(dn_drive_state_get(e.s, 4), DN_DRIVE_FAILED);
	{
		struct dn_object_info info;
		unsigned ok, n, q;

		CHECK_EQ(dn_stat(e.s, "b", "q2", &info), ZC_E(ZC_NO_KEY));
		/* Now a new write is refused at once, with the counts for the message. */
		CHECK_EQ(dn_write_quorum_check(e.s, 0, 0, &ok, &n, &q), ZC_E(ZC_NO_QUORUM));
		CHECK_EQ(ok, 4);
		CHECK_EQ(n, 6);
		CHECK_EQ(q, 5);
		CHECK_EQ(t_feed(e.s, "b", "q3", buf, sizeof(buf), 3000, true, &w),
		         ZC_E(ZC_NO_QUORUM));
		CHECK_EQ(dn_stat(e.s, "b", "q3", &info), ZC_E(ZC_NO_KEY));
	}
	/* The drives come back (replaced folders): heal fills in q1's missing cell. */
	CHECK(dn_heal(e.s, 3) >= 1);
	CHECK(dn_heal(e.s, 4) >= 0);
	CHECK_EQ(dn_drive_state_get(e.s, 3), DN_DRIVE_OK);
	t_close(&e);
	t_rmrf(e.dirs[0]);
	t_rmrf(e.dirs[1]);
	t_open(&e);
	CHECK_EQ(t_check_read(e.s, "b", "q1", 0, 0, false, buf, sizeof(buf)), 0);
	t_env_fini(&e);
}

/* A drive whose ring reports -EIO mid-write: marked failed, the write still commits. */
static void
io_error(void)
{
	struct t_env e;
	static uint8_t buf[300000];

	t_fill(buf, sizeof(buf));
	t_env_open(&e, 6, 4, 2, "b");
	t_fault_err_idx(ZC_FP_DRIVE_WRITE, 2, -EIO, 1);
	CHECK_EQ(t_put(e.s, "b", "k", buf, sizeof(buf)), 0);
	CHECK_EQ(dn_drive_state_get(e.s, 2), DN_DRIVE_FAILED);
	CHECK_EQ(t_check_read(e.s, "b", "k", 0, 0, false, buf, sizeof(buf)), 0);
	CHECK(degraded(e.s) > 0);
	/* The disk is swapped: an empty folder at the same path, then heal. */
	t_rmrf(e.dirs[2]);
	CHECK(dn_heal(e.s, 2) > 0);
	CHECK_EQ(dn_drive_state_get(e.s, 2), DN_DRIVE_OK);
	t_close(&e);
	t_rmrf(e.dirs[0]);
	t_rmrf(e.dirs[4]);
	t_open(&e);
	CHECK_EQ(t_check_read(e.s, "b", "k", 0, 0, false, buf, sizeof(buf)), 0);
	t_env_fini(&e);
}

/* Cells of object key whose missing bit is set, over all groups (metadata). */
static unsigned
missing_cells(struct dn_store *s, const char *key)
{
	struct dn_obj o;
	unsigned n = 0;

	CHECK_EQ(dn_meta_get_obj(s->meta, "b", key, &o), 0);
	for (size_t p = 0; p < o.npieces; p++) {
		struct dn_extent x;

		CHECK_EQ(dn_meta_get_extent(s->meta, o.pieces[p].ext_id, &x), 0);
		for (uint32_t g = 0; g < x.ngroups; g++)
			n += (unsigned)__builtin_popcount(x.groups[g].missing);
		dn_extent_free(&x);
	}
	dn_obj_fini(&o);
	return n;
}

/*
 * A full drive (ENOSPC) is not a failed one: it is marked FULL, still read, skipped by
 * new writes (its cells recorded missing while quorum holds); with too many full drives a
 * write is refused with -ENOSPC; once a re-probe finds room it is writable again, with no
 * heal or restart.
 */
static void
full_drive(void)
{
	struct t_env e;
	static uint8_t buf[200000];
	struct dn_write *w;
	unsigned ok, n, q;

	t_fill(buf, sizeof(buf));
	t_env_init(&e, 6, 4, 2);
	e.o.full_probe_ns = 3600ull * 1000000000ull; /* no re-probe until the test says so */
	t_open(&e);
	CHECK_EQ(dn_bucket_create(e.s, "b", NULL), 0);
	CHECK_EQ(t_put(e.s, "b", "before", buf, sizeof(buf)), 0);
	dn_drive_mark_full(&e.s->drives[5]);
	CHECK_EQ(dn_drive_state_get(e.s, 5), DN_DRIVE_FULL);
	CHECK_EQ(dn_write_quorum_check(e.s, 0, 0, NULL, NULL, NULL), 0);
	/* 5 writable drives: quorum holds; drive 5's cells are recorded for heal. */
	CHECK_EQ(t_put(e.s, "b", "quorum", buf, sizeof(buf)), 0);
	CHECK(missing_cells(e.s, "quorum") > 0);
	CHECK_EQ(dn_drive_state_get(e.s, 5), DN_DRIVE_FULL);
	CHECK_EQ(t_check_read(e.s, "b", "before", 0, 0, false, buf, sizeof(buf)), 0);
	CHECK_EQ(t_check_read(e.s, "b", "quorum", 0, 0, false, buf, sizeof(buf)), 0);
	/* A second full drive: 4 < quorum 5, refused before any byte moves. */
	dn_drive_mark_full(&e.s->drives[2]);
	CHECK_EQ(dn_write_quorum_check(e.s, 0, 0, &ok, &n, &q), -ENOSPC);
	CHECK_EQ(ok, 4);
	CHECK_EQ(n, 6);
	CHECK_EQ(q, 5);
	CHECK_EQ(t_feed(e.s, "b", "nospace", buf, sizeof(buf), 3000, true, &w), -ENOSPC);
	/* A 2+1 write needs only 3: still taken. */
	CHECK_EQ(dn_write_quorum_check(e.s, 2, 1, NULL, NULL, NULL), 0);
	/* A failed drive stays failed: marking it full changes nothing. */
	CHECK_EQ(dn_drive_fail(e.s, 0), 0);
	dn_drive_mark_full(&e.s->drives[0]);
	CHECK_EQ(dn_drive_state_get(e.s, 0), DN_DRIVE_FAILED);
	CHECK(dn_heal(e.s, 0) >= 0);
	/* Space is back (the temp folder has plenty): the next write re-probes, both full
	 * drives are OK again and a new object has every cell, no heal needed. */
	for (unsigned d = 0; d < e.s->ndrives; d++) /* each drive re-probes at once */
		e.s->drives[d].o.full_probe_ns = 0;
	CHECK_EQ(dn_write_quorum_check(e.s, 0, 0, &ok, NULL, NULL), 0);
	CHECK_EQ(ok, 6);
	CHECK_EQ(dn_drive_state_get(e.s, 5), DN_DRIVE_OK);
	CHECK_EQ(dn_drive_state_get(e.s, 2), DN_DRIVE_OK);
	CHECK_EQ(t_put(e.s, "b", "after", buf, sizeof(buf)), 0);
	CHECK_EQ(missing_cells(e.s, "after"), 0);
	CHECK_EQ(t_check_read(e.s, "b", "after", 0, 0, false, buf, sizeof(buf)), 0);
	/* The cells missed while full are still recorded: heal puts them back. */
	CHECK(dn_heal(e.s, 5) > 0);
	CHECK_EQ(missing_cells(e.s, "quorum"), 0);
	t_env_fini(&e);
}

/* The background healer rebuilds the cells a write missed on a full drive once it has
 * room again, with no operator step; a failed drive's cells it leaves to `heal`. */
static void
background_heal(void)
{
	struct t_env e;
	static uint8_t buf[300000];
	int waited = 0;

	t_fill(buf, sizeof(buf));
	t_env_init(&e, 6, 4, 2);
	e.o.full_probe_ns = 3600ull * 1000000000ull;
	e.o.heal_interval_ns = 20000000; /* 20 ms */
	t_open(&e);
	CHECK_EQ(dn_bucket_create(e.s, "b", NULL), 0);
	/* Let the start-up turn go by first: then only the write's own note can bring the
	 * healer back (a commit path that forgot it once passed on this timing alone). */
	while (atomic_load(&e.s->heal_pending))
		usleep(1000);
	usleep(100000);
	dn_drive_mark_full(&e.s->drives[5]);
	CHECK_EQ(t_put(e.s, "b", "missed", buf, sizeof(buf)), 0);
	CHECK(missing_cells(e.s, "missed") > 0);
	/* Still full: the healer waits (and keeps the work pending). */
	usleep(100000);
	CHECK(missing_cells(e.s, "missed") > 0);
	/* Room again: the next probe makes it writable, the healer does the rest. */
	for (unsigned d = 0; d < e.s->ndrives; d++) /* each drive re-probes at once */
		e.s->drives[d].o.full_probe_ns = 0;
	CHECK_EQ(dn_write_quorum_check(e.s, 0, 0, NULL, NULL, NULL), 0);
	CHECK_EQ(dn_drive_state_get(e.s, 5), DN_DRIVE_OK);
	/* A bound, not a timing claim: 30 s, for a machine busy compiling an ASan build. */
	while (missing_cells(e.s, "missed") > 0 && waited++ < 3000)
		usleep(10000);
	CHECK_EQ(missing_cells(e.s, "missed"), 0);
	CHECK(atomic_load(&e.s->cells_healed) > 0);
	CHECK_EQ(t_check_read(e.s, "b", "missed", 0, 0, false, buf, sizeof(buf)), 0);
	/* A failed drive's missing cells stay for the operator's heal. */
	CHECK_EQ(dn_drive_fail(e.s, 1), 0);
	CHECK_EQ(t_put(e.s, "b", "failed", buf, sizeof(buf)), 0);
	usleep(100000);
	CHECK(missing_cells(e.s, "failed") > 0);
	t_env_fini(&e);
}

int
main(void)
{
	full_drive();
	background_heal();
	io_error();
	missing_drives();
	corrupted_cell();
	quorum();
	printf("ok\n");
	return 0;
}
