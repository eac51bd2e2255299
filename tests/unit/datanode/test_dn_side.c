/*
 * The engine and the layer beside it (dn_store_opts.side, datanode/store/dn_store.h): the
 * engine reaches the cell store only through the table, so a test's own table sees every
 * call. Open calls init once and close fini once; the restart sweep asks file_named about
 * each file no extent owns and keeps exactly the ones it claims (without a side it removes
 * them all); a scrub pass walks the side's cells with the scrubber's check, counts a good
 * file and a rotted one, and hands the rotted one back through bad.
 */
#include <fcntl.h>
#include <sys/stat.h>

#include "dn_test.h"
#include "dn_internal.h"
#include "dn_scrub.h"

#define ID_KEEP 0x1111000000000001ull
#define ID_DROP 0x2222000000000002ull

static struct {
	unsigned init, fini, named, scrubs, checks, bad;
	int handed;
	char asked[4][256];
	char good[PATH_MAX], rotted[PATH_MAX];
	uint32_t crc;
} calls;

static int
side_init(struct dn_store *s)
{
	(void)s;
	calls.init++;
	return 0;
}

static void
side_fini(struct dn_store *s)
{
	(void)s;
	calls.fini++;
}

static int
side_named(struct dn_store *s, unsigned drive, const char *name)
{
	uint64_t id;

	(void)s;
	CHECK_EQ(drive, 0u);
	if (calls.named < 4)
		snprintf(calls.asked[calls.named], sizeof(calls.asked[0]), "%s", name);
	calls.named++;
	CHECK_EQ(dn_layout_parse(name, &id), 0);
	return id == ID_KEEP;
}

static int
side_scrub(struct dn_store *s, dn_side_check_fn check, dn_side_bad_fn bad, void *arg)
{
	struct dn_side_file f = { .id = { ID_KEEP, 0, 0 },
		                  .drive = 0,
		                  .length = 4096,
		                  .chunk = 4096,
		                  .crcs = &calls.crc,
		                  .ncrc = 1,
		                  .bucket = "b",
		                  .key = "k" };
	int rc;

	(void)s;
	calls.scrubs++;
	f.path = calls.good;
	rc = check(arg, &f);
	calls.checks++;
	CHECK_EQ(rc, 0);
	f.path = calls.rotted;
	rc = check(arg, &f);
	calls.checks++;
	CHECK_EQ(rc, 1);
	calls.bad++;
	bad(arg, &f, calls.handed);
	return 0;
}

static const struct dn_store_side test_side = {
	.init = side_init,
	.fini = side_fini,
	.file_named = side_named,
	.scrub = side_scrub,
};

static void
put_file(const char *root, uint64_t id, const uint8_t *p, size_t n, char *path)
{
	int fd;

	CHECK_EQ(dn_layout_mkdirs(root, id), 0);
	CHECK_EQ(dn_layout_path(root, id, 0, 0, path, PATH_MAX), 0);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, p, n), (ssize_t)n);
	close(fd);
}

static bool
exists(const char *path)
{
	return access(path, F_OK) == 0;
}

int
main(void)
{
	static uint8_t data[4096];
	char keep[PATH_MAX], drop[PATH_MAX];
	struct t_env e;
	struct dn_scrub *sc;
	struct dn_scrub_stats st = { 0 };

	t_env_init(&e, 3, 2, 1);
	e.o.side = &test_side;
	t_open(&e);
	CHECK_EQ(calls.init, 1u);
	CHECK_EQ(dn_bucket_create(e.s, "b", NULL), 0); /* the metadata is not empty: it sweeps */
	t_close(&e);
	CHECK_EQ(calls.fini, 1u);

	/* Two files no extent owns: the side claims one. */
	t_fill(data, sizeof(data));
	put_file(e.drives[0], ID_KEEP, data, sizeof(data), keep);
	put_file(e.drives[0], ID_DROP, data, sizeof(data), drop);
	calls.named = 0;
	t_open(&e);
	CHECK_EQ(calls.init, 2u);
	CHECK_EQ(calls.named, 2u);
	CHECK(exists(keep));
	CHECK(!exists(drop));
	CHECK_EQ(atomic_load(&e.s->cells_swept_open), 1u);

	/* A pass: the side's walk with the scrubber's check, one good file, one rotted. */
	snprintf(calls.good, sizeof(calls.good), "%s", keep);
	calls.crc = zc_crc32c(0, data, sizeof(data));
	data[100] ^= 1;
	put_file(e.drives[0], ID_DROP, data, sizeof(data), calls.rotted);
	calls.handed = 1;
	CHECK_EQ(dn_scrub_create(&(struct dn_scrub_opts){ .store = e.s,
	                                                  .rate_bps = 1ull << 30,
	                                                  .no_thread = true },
	                         &sc),
	         0);
	CHECK_EQ(dn_scrub_pass(sc, &st), 0);
	CHECK_EQ(calls.scrubs, 1u);
	CHECK_EQ(calls.checks, 2u);
	CHECK_EQ(calls.bad, 1u);
	CHECK_EQ(st.cells, 2u);
	CHECK_EQ(st.bytes, 2u * sizeof(data));
	CHECK_EQ(st.errors[DN_SCRUB_CRC], 1u);
	CHECK_EQ(st.repaired, 1u);
	/* Not handed over: counted as an error, not as a repair. */
	calls.handed = -EIO;
	memset(&st, 0, sizeof(st));
	CHECK_EQ(dn_scrub_pass(sc, &st), 0);
	CHECK_EQ(st.errors[DN_SCRUB_CRC], 1u);
	CHECK_EQ(st.repaired, 0u);
	dn_scrub_destroy(sc);
	t_close(&e);
	CHECK_EQ(calls.fini, 2u);

	/* The engine alone: no side, so nothing claims the file and the sweep removes it. */
	e.o.side = NULL;
	calls.named = 0;
	t_open(&e);
	CHECK_EQ(calls.named, 0u);
	CHECK(!exists(keep));
	CHECK_EQ(calls.init, 2u);
	t_close(&e);
	CHECK_EQ(calls.fini, 2u);
	t_env_fini(&e);
	printf("test_dn_side: ok\n");
	return 0;
}
