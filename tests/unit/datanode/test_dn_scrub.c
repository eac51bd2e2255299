/*
 * The scrubber (datanode/engine/dn_scrub.c) on a real store: rotted, cut and removed cell files
 * of single-node objects found by one pass, marked missing and rebuilt by the background
 * healer to their original bytes, nothing else touched; a rotted cluster cell dropped
 * from the cell store for the cluster healer, a pending one left alone; the thread's
 * passes and a prompt stop in the middle of a slow one; the metrics.
 */
#include <fcntl.h>
#include <sys/stat.h>

#include "dn_test.h"
#include "dn_internal.h"
#include "dn_scrub.h"

#define NOBJ 3

static uint8_t *bufs[NOBJ];
static size_t lens[NOBJ];

/* Every cell file under the drives, with its bytes: what "untouched" is checked against. */
struct snap {
	char path[64][512];
	uint8_t *data[64];
	size_t len[64];
	unsigned n;
};

static uint8_t *
slurp(const char *path, size_t *len)
{
	struct stat st;
	uint8_t *p;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return NULL;
	CHECK_EQ(fstat(fd, &st), 0);
	p = malloc((size_t)st.st_size + 1);
	CHECK(p);
	CHECK_EQ(pread(fd, p, (size_t)st.st_size, 0), st.st_size);
	close(fd);
	*len = (size_t)st.st_size;
	return p;
}

static void
snap_take(struct t_env *e, struct snap *s)
{
	char cmd[400], line[512];
	FILE *p;

	memset(s, 0, sizeof(*s));
	snprintf(cmd, sizeof(cmd), "find %s -path '*/data/*' -type f | sort", e->root);
	p = popen(cmd, "r");
	CHECK(p);
	while (fgets(line, sizeof(line), p)) {
		CHECK(s->n < 64);
		line[strcspn(line, "\n")] = 0;
		snprintf(s->path[s->n], sizeof(s->path[s->n]), "%s", line);
		s->data[s->n] = slurp(line, &s->len[s->n]);
		CHECK(s->data[s->n]);
		s->n++;
	}
	pclose(p);
}

/* Files of b that differ from a (missing, other bytes); a and b list the same paths. */
static unsigned
snap_diff(const struct snap *a, const struct snap *b)
{
	unsigned d = 0;

	CHECK_EQ(a->n, b->n);
	for (unsigned i = 0; i < a->n; i++) {
		CHECK(strcmp(a->path[i], b->path[i]) == 0);
		if (a->len[i] != b->len[i] || memcmp(a->data[i], b->data[i], a->len[i]))
			d++;
	}
	return d;
}

static void
snap_free(struct snap *s)
{
	for (unsigned i = 0; i < s->n; i++)
		free(s->data[i]);
}

/* The file of cell c of group g of object key, and its drive. */
static unsigned
cell_file(struct t_env *e, const char *key, uint32_t g, unsigned c, char *path, size_t n)
{
	struct dn_obj o;
	struct dn_extent x;
	unsigned d;

	CHECK_EQ(dn_meta_get_obj(e->s->meta, "b", key, &o), 0);
	CHECK_EQ(dn_meta_get_extent(e->s->meta, o.pieces[0].ext_id, &x), 0);
	d = x.groups[g].drives[c];
	CHECK_EQ(dn_layout_path(e->dirs[d], x.id, g, c, path, n), 0);
	dn_extent_free(&x);
	dn_obj_fini(&o);
	return d;
}

static unsigned
missing_cells(struct dn_store *s, const char *key)
{
	struct dn_obj o;
	struct dn_extent x;
	unsigned n = 0;

	CHECK_EQ(dn_meta_get_obj(s->meta, "b", key, &o), 0);
	CHECK_EQ(dn_meta_get_extent(s->meta, o.pieces[0].ext_id, &x), 0);
	for (uint32_t g = 0; g < x.ngroups; g++)
		n += (unsigned)__builtin_popcount(x.groups[g].missing);
	dn_extent_free(&x);
	dn_obj_fini(&o);
	return n;
}

static void
flip(const char *path, off_t at)
{
	int fd = open(path, O_RDWR);
	uint8_t b;

	CHECK(fd >= 0);
	CHECK_EQ(pread(fd, &b, 1, at), 1);
	b ^= 0x20;
	CHECK_EQ(pwrite(fd, &b, 1, at), 1);
	close(fd);
}

static void
put_all(struct t_env *e)
{
	size_t sizes[NOBJ] = { 3 * e->o.cell_size * e->o.k + 77, e->o.cell_size * e->o.k, 5000 };

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
	}
}

static struct dn_scrub *
scrub_create(struct t_env *e)
{
	struct dn_scrub *sc;

	CHECK_EQ(dn_scrub_create(&(struct dn_scrub_opts){ .store = e->s,
	                                                  .rate_bps = 1ull << 30,
	                                                  .no_thread = true },
	                         &sc),
	         0);
	return sc;
}

/* The healer's turn comes every 20 ms; a bound of 30 s for a busy ASan machine. */
static void
wait_healed(struct t_env *e, const char *key)
{
	for (int i = 0; i < 3000 && missing_cells(e->s, key); i++)
		usleep(10000);
	CHECK_EQ(missing_cells(e->s, key), 0);
}

static void
single_node(void)
{
	struct t_env e;
	struct dn_scrub *sc;
	struct dn_scrub_stats st = { 0 };
	struct snap before, after;
	char rot[PATH_MAX], cut[PATH_MAX], gone[PATH_MAX];
	char *metrics = NULL;
	size_t mlen = 0;
	FILE *mf;
	unsigned rot_drive;
	uint64_t mism;

	t_env_init(&e, 6, 4, 2);
	e.o.heal_interval_ns = 20000000; /* 20 ms */
	t_open(&e);
	CHECK_EQ(dn_bucket_create(e.s, "b", NULL), 0);
	put_all(&e);
	snap_take(&e, &before);
	sc = scrub_create(&e);

	/* A clean store: every non-empty cell read, nothing found. */
	CHECK_EQ(dn_scrub_pass(sc, &st), 0);
	CHECK(st.cells > 0);
	CHECK(st.bytes >= lens[0] + lens[1] + lens[2]);
	for (int k = 0; k < DN_SCRUB_KINDS; k++)
		CHECK_EQ(st.errors[k], 0);

	/* Rot in a data cell of o0 (second chunk), o1's parity cell cut short, a cell of o2
	 * removed: one kind each. */
	rot_drive = cell_file(&e, "o0", 0, 1, rot, sizeof(rot));
	flip(rot, (off_t)e.o.chunk_size + 5);
	cell_file(&e, "o1", 0, 4, cut, sizeof(cut));
	CHECK_EQ(truncate(cut, 1000), 0);
	cell_file(&e, "o2", 0, 0, gone, sizeof(gone));
	CHECK_EQ(unlink(gone), 0);
	mism = atomic_load(&e.s->drives[rot_drive].crc_mismatches);

	memset(&st, 0, sizeof(st));
	CHECK_EQ(dn_scrub_pass(sc, &st), 0);
	CHECK_EQ(st.errors[DN_SCRUB_CRC], 1);
	CHECK_EQ(st.errors[DN_SCRUB_SIZE], 1);
	CHECK_EQ(st.errors[DN_SCRUB_MISSING], 1);
	CHECK_EQ(st.errors[DN_SCRUB_IO], 0);
	CHECK_EQ(st.repaired, 3);
	CHECK_EQ(atomic_load(&e.s->drives[rot_drive].crc_mismatches), mism + 1);

	/* The background healer rebuilt each in place: every file as it was written. */
	wait_healed(&e, "o0");
	wait_healed(&e, "o1");
	wait_healed(&e, "o2");
	snap_take(&e, &after);
	CHECK_EQ(snap_diff(&before, &after), 0);
	snap_free(&after);
	check_all(&e);

	/* The next pass finds nothing; the counters kept what the last one found. */
	memset(&st, 0, sizeof(st));
	CHECK_EQ(dn_scrub_pass(sc, &st), 0);
	for (int k = 0; k < DN_SCRUB_KINDS; k++)
		CHECK_EQ(st.errors[k], 0);
	mf = open_memstream(&metrics, &mlen);
	CHECK(mf);
	dn_scrub_metrics(sc, mf);
	fclose(mf);
	CHECK(strstr(metrics, "zest_scrub_errors_total{kind=\"crc\"} 1\n"));
	CHECK(strstr(metrics, "zest_scrub_errors_total{kind=\"size\"} 1\n"));
	CHECK(strstr(metrics, "zest_scrub_errors_total{kind=\"missing\"} 1\n"));
	CHECK(strstr(metrics, "zest_scrub_errors_total{kind=\"io\"} 0\n"));
	CHECK(strstr(metrics, "zest_scrub_repairs_total 3\n"));
	CHECK(strstr(metrics, "zest_scrub_passes_total 3\n"));
	CHECK(!strstr(metrics, "zest_scrub_last_pass_timestamp_seconds 0\n"));
	free(metrics);

	/* m = 2: with a rotted cell repaired, o0 survives two more cells of that group lost. */
	flip(rot, 3);
	CHECK_EQ(dn_scrub_pass(sc, NULL), 0);
	wait_healed(&e, "o0");
	cell_file(&e, "o0", 0, 0, gone, sizeof(gone));
	CHECK_EQ(unlink(gone), 0);
	cell_file(&e, "o0", 0, 5, gone, sizeof(gone));
	CHECK_EQ(unlink(gone), 0);
	CHECK_EQ(t_check_read(e.s, "b", "o0", 0, 0, false, bufs[0], lens[0]), 0);

	dn_scrub_destroy(sc);
	snap_free(&before);
	for (int i = 0; i < NOBJ; i++)
		free(bufs[i]);
	t_env_fini(&e);
}

/* ---- cluster cells ---- */

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

static void
put_cell(struct dn_store *s, uint64_t extent, unsigned cell, const uint8_t *p, size_t len)
{
	struct dn_cell_spec sp = { .id = { extent, 0, cell },
		                   .length = len,
		                   .k = 4,
		                   .m = 2,
		                   .cell_size = 16384,
		                   .stripes_per_group = 4,
		                   .bucket = "bkt",
		                   .key = "k" };
	struct t_cwait cw = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0 };
	struct t_slice *sl = malloc(sizeof(*sl) + len);
	struct zc_seg seg;
	struct dn_cell_write *w;

	CHECK(sl);
	zc_ref_init(&sl->ref, t_slice_release);
	memcpy(sl->data, p, len);
	seg = (struct zc_seg){ sl->data, len, &sl->ref };
	CHECK_EQ(dn_cell_write_open(s, &sp, &w), 0);
	CHECK_EQ(dn_cell_write_data(w, 0, &seg, 1), 0);
	zc_ref_put(&sl->ref);
	dn_cell_write_finish(w, cell_cb, &cw);
	pthread_mutex_lock(&cw.lock);
	while (!cw.done)
		pthread_cond_wait(&cw.cond, &cw.lock);
	pthread_mutex_unlock(&cw.lock);
	CHECK_EQ(cw.err, 0);
}

static void
cell_path(struct t_env *e, struct dn_cell_id id, char *path, size_t n)
{
	struct dn_cell_info ci;

	CHECK_EQ(dn_cell_stat(e->s, id, &ci), 0);
	CHECK_EQ(dn_layout_path(e->dirs[ci.drive], id.extent, id.group, id.cell, path, n), 0);
	dn_cell_info_fini(&ci);
}

static void
cluster_cells(void)
{
	static uint8_t data[3][40000];
	struct dn_cell_id good = { 0x1111, 0, 0 }, bad = { 0x1111, 0, 1 }, pend = { 0x2222, 0, 0 };
	struct dn_scrub_stats st = { 0 };
	struct dn_cell_info ci;
	char path[PATH_MAX];
	struct dn_scrub *sc;
	struct t_env e;

	t_env_init(&e, 2, 4, 2);
	e.o.cells_only = true;
	t_open(&e);
	for (int i = 0; i < 3; i++)
		t_fill(data[i], sizeof(data[i]));
	put_cell(e.s, good.extent, good.cell, data[0], sizeof(data[0]));
	put_cell(e.s, bad.extent, bad.cell, data[1], sizeof(data[1]));
	put_cell(e.s, pend.extent, pend.cell, data[2], sizeof(data[2]));
	CHECK_EQ(dn_cell_commit(e.s, good), 0);
	CHECK_EQ(dn_cell_commit(e.s, bad), 0);
	sc = scrub_create(&e);

	CHECK_EQ(dn_scrub_pass(sc, &st), 0);
	CHECK_EQ(st.cells, 2); /* the pending one is the collector's */
	CHECK_EQ(st.bytes, 2 * sizeof(data[0]));

	cell_path(&e, bad, path, sizeof(path));
	flip(path, 30000);
	cell_path(&e, pend, path, sizeof(path));
	flip(path, 10);
	memset(&st, 0, sizeof(st));
	CHECK_EQ(dn_scrub_pass(sc, &st), 0);
	CHECK_EQ(st.errors[DN_SCRUB_CRC], 1);
	CHECK_EQ(st.repaired, 1);
	/* Dropped, so the cluster healer's next pass marks it missing in its record. */
	CHECK_EQ(dn_cell_stat(e.s, bad, &ci), ZC_E(ZC_NO_KEY));
	CHECK_EQ(dn_cell_stat(e.s, good, &ci), 0);
	dn_cell_info_fini(&ci);
	CHECK_EQ(dn_cell_stat(e.s, pend, &ci), 0);
	dn_cell_info_fini(&ci);

	memset(&st, 0, sizeof(st));
	CHECK_EQ(dn_scrub_pass(sc, &st), 0);
	CHECK_EQ(st.cells, 1);
	CHECK_EQ(st.errors[DN_SCRUB_CRC], 0);

	/* A retired cell (its record replaced) only waits out the read grace: not scrubbed,
	 * so its rot is neither counted nor handed to the healer; it stays for its readers. */
	CHECK_EQ(dn_cell_retire(e.s, good), 1);
	cell_path(&e, good, path, sizeof(path));
	flip(path, 20000);
	memset(&st, 0, sizeof(st));
	CHECK_EQ(dn_scrub_pass(sc, &st), 0);
	CHECK_EQ(st.cells, 0);
	CHECK_EQ(st.errors[DN_SCRUB_CRC], 0);
	CHECK_EQ(dn_cell_stat(e.s, good, &ci), 0);
	CHECK(ci.retired);
	dn_cell_info_fini(&ci);
	dn_scrub_destroy(sc);
	t_env_fini(&e);
}

/* ---- the thread ---- */

static uint64_t
passes(struct dn_scrub *sc)
{
	char *m = NULL, *p;
	size_t len = 0;
	unsigned long long n = 0;
	FILE *f = open_memstream(&m, &len);

	CHECK(f);
	dn_scrub_metrics(sc, f);
	fclose(f);
	p = strstr(m, "\nzest_scrub_passes_total ");
	CHECK(p && sscanf(p, "\nzest_scrub_passes_total %llu", &n) == 1);
	free(m);
	return n;
}

static void
thread(void)
{
	static uint8_t big[600000];
	struct dn_scrub *sc;
	struct t_env e;
	int i;

	t_env_open(&e, 6, 4, 2, "b");
	t_fill(big, sizeof(big));
	CHECK_EQ(t_put(e.s, "b", "big", big, sizeof(big)), 0);
	CHECK_EQ(dn_scrub_create(&(struct dn_scrub_opts){ .store = e.s }, &sc), -EINVAL);
	/* A pass every second, the first a second after start. */
	CHECK_EQ(dn_scrub_create(&(struct dn_scrub_opts){ .store = e.s,
	                                                  .rate_bps = 1ull << 30,
	                                                  .interval_ns = 1000000000ull },
	                         &sc),
	         0);
	for (i = 0; i < 3000 && passes(sc) < 2; i++)
		usleep(10000);
	CHECK(passes(sc) >= 2);
	dn_scrub_destroy(sc);

	/* 4 KiB/s: the pass would take minutes; stop ends it in its sleep. */
	CHECK_EQ(dn_scrub_create(&(struct dn_scrub_opts){ .store = e.s,
	                                                  .rate_bps = 4096,
	                                                  .interval_ns = 1000000000ull },
	                         &sc),
	         0);
	usleep(1500000);
	dn_scrub_stop(sc);
	CHECK_EQ(passes(sc), 0);
	dn_scrub_destroy(sc);
	t_env_fini(&e);
}

int
main(void)
{
	single_node();
	cluster_cells();
	thread();
	printf("ok\n");
	return 0;
}
