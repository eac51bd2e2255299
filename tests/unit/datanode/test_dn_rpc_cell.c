/*
 * The cell calls (datanode/dn_rpc_cell.c) in one process, as a coordinator makes them to a
 * peer: a store over temp folders, the binding, an rpc server on a loopback port
 * (plaintext, as test_dn_rpc.c) and an rpc client. A cell is sent by reference from many
 * odd spans, each its own refcounted "receive slice", and read back byte-identical; the
 * receiving side copies no payload byte with the zero-copy marshaller. Bad input (a CRC
 * that lies, a second open of a cell, a bad layout, a short stream) gets its precise error
 * and leaves no file and no entry; a rotted chunk ends a ReadCell with DATA_LOSS; a test
 * build's link faults ("peer.send", zc_fault.h) are refused the same way. Every case ends with no
 * live payload ref and no live gRPC buffer.
 */
#include "dn_rpc_test.h"
#include "dn_internal.h"
#include "rpc_raw.h"
#include "rpc_stats.h"

#include <fcntl.h>

static void
env_up(struct t_rpc_env *e, enum rpc_marshaller marshaller, size_t call_cap)
{
	t_rpc_env_init(e);
	e->bo.call_cap = call_cap;
	e->so.marshaller = marshaller;
	e->co.max_inflight = 256 << 10;
	t_rpc_env_open(e, NULL);
}

/* ---- a WriteCell by reference ---- */
static struct rpc_cell_open
cell_open(uint64_t extent, uint32_t group, uint32_t cell, uint64_t length)
{
	return (struct rpc_cell_open){ .id = { extent, group, cell },
		                       .length = length,
		                       .ec_k = 4,
		                       .ec_m = 2,
		                       .cell_size = 1 << 20,
		                       .stripes_per_group = 4,
		                       .bucket = "bkt",
		                       .key = "obj" };
}

/*
 * Send buf as the cell `op` names: messages of 1 to 12 spans of 1 byte to max_span bytes,
 * each span a separate slice at an odd address holding its own ref (as the coordinator's
 * gRPC receive slices would), the client's refs put right after the send. send_len < the
 * open's length: commit early (a short stream). Returns the status's err.
 */
static int
cell_put(struct t_rpc_env *e, const struct rpc_cell_open *op, const uint8_t *buf, size_t send_len,
         size_t max_span, struct t_wstate *s)
{
	struct rpc_cwrite *w;
	size_t at = 0;

	t_wstate_init(s);
	CHECK_EQ(rpc_cwrite_open_cell(e->cl, op, &t_wstate_cbs, s, &w), 0);
	while (at < send_len) {
		struct zc_seg segs[12];
		size_t start = at;
		unsigned n = t_slices_next(buf, &at, send_len, max_span, segs, 12), i;
		int rc;

		for (;;) {
			pthread_mutex_lock(&s->mu);
			s->writable = false;
			pthread_mutex_unlock(&s->mu);
			rc = rpc_cwrite_send(w, segs, n);
			if (rc != -EAGAIN)
				break;
			pthread_mutex_lock(&s->mu);
			while (!s->writable && !s->done)
				pthread_cond_wait(&s->cond, &s->mu);
			pthread_mutex_unlock(&s->mu);
		}
		for (i = 0; i < n; i++)
			zc_ref_put(segs[i].ref); /* ours; the queued message holds its own */
		if (rc) {
			CHECK_EQ(rc, -ECANCELED); /* the server failed the call: done follows */
			at = start;
			break;
		}
	}
	if (at == send_len)
		(void)rpc_cwrite_commit(w, NULL, 0, NULL);
	t_wstate_wait(s, 0);
	rpc_cwrite_destroy(w);
	t_wstate_fini(s);
	return s->st.err;
}

/* ---- a ReadCell into memory ---- */
struct rstate {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool done, bad;
	struct rpc_status st;
	uint8_t *buf;
	uint64_t base, next;
	size_t cap;
};

static int
r_chunk(void *arg, struct rpc_cread *r, const struct rpc_object_info *info, uint64_t offset,
        const struct zc_seg *segs, size_t n, size_t len)
{
	struct rstate *s = arg;

	(void)r;
	(void)len;
	if (info || offset != s->next)
		s->bad = true;
	for (size_t i = 0; i < n; i++) {
		if (offset - s->base + segs[i].len > s->cap) {
			s->bad = true;
			break;
		}
		memcpy(s->buf + (offset - s->base), segs[i].ptr, segs[i].len);
		offset += segs[i].len;
	}
	s->next = offset;
	return 0;
}

static void
r_done(void *arg, struct rpc_cread *r, const struct rpc_status *st)
{
	struct rstate *s = arg;

	(void)r;
	pthread_mutex_lock(&s->mu);
	s->st = *st;
	s->done = true;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->mu);
}

/* Read [off, off + len) of a cell (has_len false: to its end) into out; returns the
 * status's err, *got the bytes delivered. */
static int
cell_get(struct t_rpc_env *e, struct rpc_cell_id id, uint64_t off, uint64_t len, bool has_len,
         uint8_t *out, size_t cap, size_t *got, struct rpc_status *st)
{
	struct rpc_cell_read_req rq = { id, off, len, has_len };
	struct rpc_cread_cbs cbs = { r_chunk, r_done };
	struct rstate s = { .buf = out, .base = off, .next = off, .cap = cap };
	struct rpc_cread *r;

	pthread_mutex_init(&s.mu, NULL);
	pthread_cond_init(&s.cond, NULL);
	CHECK_EQ(rpc_cread_open_cell(e->cl, &rq, &cbs, &s, &r), 0);
	pthread_mutex_lock(&s.mu);
	while (!s.done)
		pthread_cond_wait(&s.cond, &s.mu);
	pthread_mutex_unlock(&s.mu);
	rpc_cread_destroy(r);
	pthread_mutex_destroy(&s.mu);
	pthread_cond_destroy(&s.cond);
	CHECK(!s.bad);
	*got = s.next - off;
	*st = s.st;
	return s.st.err;
}

static int
cells_call_t(struct t_rpc_env *e, enum rpc_method m, const struct rpc_cell_id *ids, size_t n,
             bool touch, uint32_t *count, struct rpc_status *st)
{
	union rpc_unary_req rq = { .cells = { ids, n, touch } };
	struct rpc_unary_resp resp;
	int rc = rpc_client_call(e->cl, m, &rq, &resp, st);

	if (!rc)
		*count = resp.cells.count;
	rpc_unary_resp_fini(&resp);
	return rc;
}

static int
cells_call(struct t_rpc_env *e, enum rpc_method m, const struct rpc_cell_id *ids, size_t n,
           uint32_t *count, struct rpc_status *st)
{
	return cells_call_t(e, m, ids, n, false, count, st);
}

static struct dn_cell_info
entry_of(struct t_rpc_env *e, struct rpc_cell_id id)
{
	struct dn_cell_info info;

	CHECK_EQ(dn_cell_stat(e->t.s, (struct dn_cell_id){ id.extent, id.group, id.cell }, &info),
	         0);
	return info;
}

static bool
has_entry(struct t_rpc_env *e, struct rpc_cell_id id, bool *pending)
{
	struct dn_cell_info info;
	int rc = dn_cell_stat(e->t.s, (struct dn_cell_id){ id.extent, id.group, id.cell }, &info);

	CHECK(rc == 0 || rc == ZC_E(ZC_NO_KEY));
	if (rc)
		return false;
	if (pending)
		*pending = info.pending;
	dn_cell_info_fini(&info);
	return true;
}

static uint64_t
copied(void)
{
	struct rpc_stats st;
	uint64_t n = 0;

	rpc_stats_get(&st);
	for (int i = 0; i < RPC_STAGE_COUNT; i++)
		n += st.copied_bytes[i];
	return n;
}

static void
test_round_trip(enum rpc_marshaller marshaller)
{
	struct t_rpc_env e;
	struct t_wstate s;
	struct rpc_status st;
	size_t len = (3u << 20) + 12345, got;
	uint8_t *buf = malloc(len), *back = malloc(len);
	struct rpc_cell_open op = cell_open(0x1234abcd5678ef01ull, 7, 5, len);
	struct rpc_cell_id missing = { 0x99, 0, 0 };
	uint64_t copies;
	uint32_t count;
	bool pending;

	t_fill(buf, len);
	env_up(&e, marshaller, 256 << 10); /* small queue: the call pauses and resumes */
	copies = copied();
	CHECK_EQ(cell_put(&e, &op, buf, len, 9000, &s), 0);
	CHECK_EQ(s.res.size, len);
	CHECK_EQ(s.res.crc32c, zc_crc32c(0, buf, len));
	if (marshaller == RPC_MARSHAL_ZEROCOPY)
		CHECK_EQ(copied() - copies, 0); /* the receiving side copied no payload byte */
	else
		CHECK(copied() - copies >= len);
	CHECK(has_entry(&e, op.id, &pending));
	CHECK(pending);

	/* whole, and an odd range across read windows */
	memset(back, 0, len);
	CHECK_EQ(cell_get(&e, op.id, 0, 0, false, back, len, &got, &st), 0);
	CHECK_EQ(got, len);
	CHECK(memcmp(buf, back, len) == 0);
	CHECK_EQ(cell_get(&e, op.id, 1000001, 2100000, true, back, len, &got, &st), 0);
	CHECK_EQ(got, 2100000);
	CHECK(memcmp(buf + 1000001, back, 2100000) == 0);
	CHECK_EQ(cell_get(&e, op.id, len, 0, true, back, len, &got, &st), 0);
	CHECK_EQ(got, 0);
	CHECK_EQ(cell_get(&e, op.id, len - 10, 11, true, back, len, &got, &st), ZC_E(ZC_INVALID));
	CHECK(strstr(st.msg, "outside 3158073 bytes") != NULL);

	/* touch (the coordinator's writer making progress): the pending cell's time moves on,
	 * still pending; a cell without an entry yet (its stream open) is skipped */
	{
		struct rpc_cell_id two[] = { op.id, missing };
		struct dn_cell_info before = entry_of(&e, op.id), after;

		CHECK_EQ(before.touched_ns, 0);
		CHECK_EQ(cells_call_t(&e, RPC_COMMIT_CELLS, two, 2, true, &count, &st), 0);
		CHECK_EQ(count, 1);
		after = entry_of(&e, op.id);
		CHECK(after.pending && !after.retired);
		CHECK(after.touched_ns >= before.created_ns);
		CHECK_EQ(after.created_ns, before.created_ns);
		/* the pending listing ages it from the touch */
		{
			struct dn_cell_info *v;
			size_t n;

			CHECK_EQ(dn_cell_list_pending_older(e.t.s, after.touched_ns, 0, &v, &n), 0);
			CHECK_EQ(n, 0);
			dn_cell_list_free(v, n);
			CHECK_EQ(dn_cell_list_pending_older(e.t.s, after.touched_ns + 1, 0, &v, &n),
			         0);
			CHECK_EQ(n, 1);
			dn_cell_list_free(v, n);
		}
		dn_cell_info_fini(&before);
		dn_cell_info_fini(&after);
	}
	/* commit: pending cleared; a missing cell is NOT_FOUND after the ones before */
	CHECK_EQ(cells_call(&e, RPC_COMMIT_CELLS, &op.id, 1, &count, &st), 0);
	CHECK_EQ(count, 1);
	CHECK(has_entry(&e, op.id, &pending));
	CHECK(!pending);
	{
		struct rpc_cell_id two[] = { op.id, missing };

		CHECK_EQ(cells_call(&e, RPC_COMMIT_CELLS, two, 2, &count, &st), ZC_E(ZC_NO_KEY));
		CHECK_EQ(rpc_status_from_err(st.err), GRPC_STATUS_NOT_FOUND);
		CHECK(strstr(st.msg, "cell 0000000000000099.0.0 (entry 1 of 2; 1 done)") != NULL);
		/* delete of a committed cell: the count says how many existed; it is retired,
		 * still readable (a GET of the replaced version), file and entry kept for the
		 * collector's read grace; a repeat keeps its first time */
		struct dn_cell_info r1, r2;

		CHECK_EQ(cells_call(&e, RPC_DELETE_CELLS, two, 2, &count, &st), 0);
		CHECK_EQ(count, 1);
		r1 = entry_of(&e, op.id);
		CHECK(r1.retired && !r1.pending && r1.touched_ns > 0);
		CHECK_EQ(t_count_files(&e.t), 1);
		CHECK_EQ(cell_get(&e, op.id, 1000001, 2100000, true, back, len, &got, &st), 0);
		CHECK(memcmp(buf + 1000001, back, 2100000) == 0);
		CHECK_EQ(cells_call(&e, RPC_DELETE_CELLS, two, 2, &count, &st), 0);
		CHECK_EQ(count, 1);
		r2 = entry_of(&e, op.id);
		CHECK(r2.retired);
		CHECK(r2.touched_ns - r1.touched_ns < 1000000000ull); /* at most the read's touch */
		/* the collector's delete of the entry as listed: the file goes with it */
		CHECK_EQ(dn_cell_delete_if(e.t.s, &r2), 1);
		CHECK(!has_entry(&e, op.id, NULL));
		CHECK_EQ(t_count_files(&e.t), 0);
		CHECK_EQ(dn_cell_delete_if(e.t.s, &r2), 0);
		dn_cell_info_fini(&r1);
		dn_cell_info_fini(&r2);
		CHECK_EQ(cells_call(&e, RPC_DELETE_CELLS, two, 2, &count, &st), 0);
		CHECK_EQ(count, 0);
	}
	CHECK_EQ(cell_get(&e, op.id, 0, 0, false, back, len, &got, &st), ZC_E(ZC_NO_KEY));
	CHECK_EQ(rpc_status_from_err(st.err), GRPC_STATUS_NOT_FOUND);
	CHECK(strstr(st.msg, "cell 1234abcd5678ef01.7.5") != NULL);
	{
		struct rpc_cell_id zero = { 0, 1, 1 };

		CHECK_EQ(cells_call(&e, RPC_DELETE_CELLS, &zero, 1, &count, &st), ZC_E(ZC_INVALID));
		CHECK(strstr(st.msg, "cells[0]: extent id 0") != NULL);
	}
	t_rpc_env_fini(&e, 1000);
	free(buf);
	free(back);
}

/* Pack a CellChunk (zest.proto) by hand: open (when op), offset, data, crc (^ crc_xor),
 * commit. */
static struct raw_msg
cell_chunk_msg(const struct rpc_cell_open *op, uint64_t offset, const uint8_t *data, size_t len,
               bool commit, uint32_t crc_xor)
{
	struct raw_msg m;
	uint8_t id[40], open[200];
	size_t n = 0, n_id = 0, n_open = 0;
	uint32_t crc = zc_crc32c(0, data, len) ^ crc_xor;

	m.bytes = malloc(len + 300);
	CHECK(m.bytes);
	if (op) {
		n_id += raw_uint(id + n_id, 1, op->id.extent);
		n_id += raw_uint(id + n_id, 2, op->id.group);
		n_id += raw_uint(id + n_id, 3, op->id.cell);
		n_open += raw_bytes(open + n_open, 1, id, n_id);
		n_open += raw_uint(open + n_open, 2, op->length);
		n_open += raw_uint(open + n_open, 3, op->ec_k);
		n_open += raw_uint(open + n_open, 4, op->ec_m);
		n_open += raw_uint(open + n_open, 5, op->cell_size);
		n_open += raw_uint(open + n_open, 6, op->stripes_per_group);
		n_open += raw_bytes(open + n_open, 7, op->bucket, strlen(op->bucket));
		n_open += raw_bytes(open + n_open, 8, op->key, strlen(op->key));
		n += raw_bytes(m.bytes + n, 1, open, n_open);
	}
	n += raw_uint(m.bytes + n, 2, offset);
	if (len)
		n += raw_bytes(m.bytes + n, 3, data, len);
	if (crc) {
		m.bytes[n++] = 4 << 3 | 5;
		for (int i = 0; i < 4; i++)
			m.bytes[n++] = (uint8_t)(crc >> (8 * i));
	}
	n += raw_uint(m.bytes + n, 5, commit);
	m.len = n;
	return m;
}

/* A name whose write was just refused is free again once its abort has finished. */
static void
put_retrying(struct t_rpc_env *e, const struct rpc_cell_open *op, const uint8_t *buf, size_t len)
{
	struct t_wstate s;
	int rc;

	for (int i = 0; i < 200; i++) {
		rc = cell_put(e, op, buf, len, 70000, &s);
		if (rc != ZC_E(ZC_SLOW_DOWN))
			break;
		usleep(10000);
	}
	CHECK_EQ(rc, 0);
}

/* The abort of a refused stream runs on a dn-cell thread: wait (up to 10 s) until the
 * files on the drives number want, and return how many there are. */
static int
files_settle(struct t_rpc_env *e, int want)
{
	int n = t_count_files(&e->t);

	for (int i = 0; i < 1000 && n != want; i++) {
		usleep(10000);
		n = t_count_files(&e->t);
	}
	return n;
}

static void
test_refusals(void)
{
	struct t_rpc_env e;
	struct t_wstate s;
	struct rpc_status st;
	size_t len = 200000;
	uint8_t *buf = malloc(len);
	struct rpc_cell_open op = cell_open(0x42, 0, 1, len);
	struct raw_msg bad[2];
	bool pending;

	t_fill(buf, len);
	env_up(&e, RPC_MARSHAL_ZEROCOPY, 0);

	/* a CRC that lies, in the second message: DATA_LOSS, no entry, no file */
	bad[0] = cell_chunk_msg(&op, 0, buf, 100000, false, 0);
	bad[1] = cell_chunk_msg(NULL, 100000, buf + 100000, len - 100000, true, 1);
	raw_call(e.target, "/zest.Datanode/WriteCell", bad, 2, true, &st);
	CHECK_EQ(rpc_status_from_err(st.err), GRPC_STATUS_DATA_LOSS);
	CHECK(strstr(st.msg, "BadDigest: CRC32C mismatch at offset 100000") != NULL);
	free(bad[0].bytes);
	free(bad[1].bytes);
	CHECK_EQ(files_settle(&e, 0), 0);
	CHECK(!has_entry(&e, op.id, NULL));
	/* in the first: the same */
	bad[0] = cell_chunk_msg(&op, 0, buf, 5000, false, 0x100);
	raw_call(e.target, "/zest.Datanode/WriteCell", bad, 1, true, &st);
	CHECK_EQ(rpc_status_from_err(st.err), GRPC_STATUS_DATA_LOSS);
	free(bad[0].bytes);

	/* the name is writable right after; a second open of it is CellExists */
	put_retrying(&e, &op, buf, len);
	CHECK_EQ(t_count_files(&e.t), 1);
	CHECK_EQ(cell_put(&e, &op, buf, len, 70000, &s), ZC_E(ZC_CELL_EXISTS));
	CHECK_EQ(rpc_status_from_err(s.st.err), GRPC_STATUS_ALREADY_EXISTS);
	CHECK(strcmp(s.st.msg, "CellExists: cell 0000000000000042.0.1 exists on this node") == 0);
	CHECK(has_entry(&e, op.id, &pending)); /* the first one stays as it was */
	CHECK(pending);
	CHECK_EQ(t_count_files(&e.t), 1);

	/* bad layouts, each named; nothing created */
	{
		struct rpc_cell_open o;

		o = cell_open(0x43, 0, 6, len); /* past 4+2 */
		CHECK_EQ(cell_put(&e, &o, buf, len, 70000, &s), ZC_E(ZC_INVALID));
		CHECK(strstr(s.st.msg, "cell index 6 past the 6 cells of 4+2") != NULL);
		o = cell_open(0x43, 0, 0, len);
		o.ec_k = 0;
		CHECK_EQ(cell_put(&e, &o, buf, len, 70000, &s), ZC_E(ZC_INVALID));
		CHECK(strstr(s.st.msg, "scheme 0+2 out of range") != NULL);
		o = cell_open(0x43, 0, 0, 20000);
		o.cell_size = 6000;
		CHECK_EQ(cell_put(&e, &o, buf, 20000, 70000, &s), ZC_E(ZC_INVALID));
		CHECK(strstr(s.st.msg, "cell size 6000") != NULL);
		o = cell_open(0x43, 0, 0, (4u << 20) + 1); /* past 4 stripes of 1 MiB */
		CHECK_EQ(cell_put(&e, &o, buf, len, 70000, &s), ZC_E(ZC_INVALID));
		CHECK(strstr(s.st.msg, "exceeds 4 stripes of 1048576 bytes") != NULL);
		o = cell_open(0, 0, 0, len);
		CHECK_EQ(cell_put(&e, &o, buf, len, 70000, &s), ZC_E(ZC_INVALID));
		CHECK(strstr(s.st.msg, "extent id 0") != NULL);
		o = cell_open(0x43, 0, 0, len);
		o.bucket = "Bad_Bucket";
		CHECK_EQ(cell_put(&e, &o, buf, len, 70000, &s), ZC_E(ZC_INVALID));
		CHECK(strstr(s.st.msg, "Bad_Bucket") != NULL);
		o = cell_open(0x43, 0, 0, len);
		o.key = "a/../b";
		CHECK_EQ(cell_put(&e, &o, buf, len, 70000, &s), ZC_E(ZC_INVALID));
		/* a short stream: commit before the open's length */
		o = cell_open(0x43, 0, 0, len);
		CHECK_EQ(cell_put(&e, &o, buf, len - 1, 70000, &s), ZC_E(ZC_INVALID));
		CHECK(strstr(s.st.msg, "commit after 199999 bytes, declared size 200000") != NULL);
		CHECK_EQ(files_settle(&e, 1), 1);
		CHECK(!has_entry(&e, o.id, NULL));
	}

	/* a byte rotted on the drive: ReadCell ends DATA_LOSS at that chunk, not with bad bytes */
	{
		char cmd[400], path[512];
		uint8_t *back = malloc(len);
		size_t got;
		FILE *p;
		int fd;

		snprintf(cmd, sizeof(cmd), "find %s -path '*/data/*' -type f", e.t.root);
		p = popen(cmd, "r");
		CHECK(p && fgets(path, sizeof(path), p));
		pclose(p);
		path[strcspn(path, "\n")] = 0;
		fd = open(path, O_WRONLY);
		CHECK(fd >= 0);
		CHECK_EQ(pwrite(fd, "\xff", 1, 150001), 1);
		close(fd);
		CHECK_EQ(cell_get(&e, op.id, 0, 0, false, back, len, &got, &st),
		         ZC_E(ZC_BAD_DIGEST));
		CHECK_EQ(rpc_status_from_err(st.err), GRPC_STATUS_DATA_LOSS);
		CHECK(strstr(st.msg, "a chunk failed its CRC32C") != NULL);
		CHECK(got <= 150001 / 4096 * 4096); /* nothing of the bad chunk was sent */
		CHECK(memcmp(buf, back, got) == 0);
		/* a range that avoids the chunk still reads */
		CHECK_EQ(cell_get(&e, op.id, 0, 4096, true, back, len, &got, &st), 0);
		CHECK(memcmp(buf, back, 4096) == 0);
		free(back);
	}
	t_rpc_env_fini(&e, 1000);
	free(buf);
}

#ifdef ZC_FAULTS
/* Poll until the refused cell's abort has removed its file (a dn-cell thread runs it). */
static void
wait_gone(struct t_rpc_env *e, struct rpc_cell_id id, unsigned files)
{
	for (int i = 0; i < 500 && (has_entry(e, id, NULL) || t_count_files(&e->t) != files); i++)
		usleep(10000);
	CHECK(!has_entry(e, id, NULL));
	CHECK_EQ(t_count_files(&e->t), files);
}

/* The peer link's faults ("peer.send", zc_fault.h): what the receiving node makes of them. */
static void
test_link_faults(void)
{
	struct t_rpc_env e;
	struct t_wstate s;
	size_t len = 200000;
	uint8_t *buf = malloc(len), *back = malloc(len);
	struct rpc_cell_open op = cell_open(0x77, 3, 2, len);
	struct rpc_status st;
	struct zc_fault f;
	size_t got;

	t_fill(buf, len);
	env_up(&e, RPC_MARSHAL_ZEROCOPY, 0);
	/* reset mid-stream: CANCELLED, and the half-written cell leaves nothing */
	f = (struct zc_fault){ .kind = ZC_FAULT_RESET, .from = 3, .count = 1 };
	zc_fault_arm(ZC_FP_PEER_SEND, NULL, &f);
	CHECK_EQ(cell_put(&e, &op, buf, len, 5000, &s), -ECANCELED);
	CHECK_EQ(rpc_status_from_err(s.st.err), GRPC_STATUS_CANCELLED);
	wait_gone(&e, op.id, 0);
	/* reset instead of the commit: the same */
	f = (struct zc_fault){ .kind = ZC_FAULT_RESET, .from = 1, .count = 1 };
	zc_fault_arm(ZC_FP_PEER_SEND, NULL, &f);
	CHECK_EQ(cell_put(&e, &op, buf, 0, 5000, &s), -ECANCELED);
	wait_gone(&e, op.id, 0);
	/* a lost message: the peer sees the gap and refuses the stream */
	f = (struct zc_fault){ .kind = ZC_FAULT_DROP, .from = 2, .count = 1 };
	zc_fault_arm(ZC_FP_PEER_SEND, NULL, &f);
	CHECK_EQ(cell_put(&e, &op, buf, len, 5000, &s), ZC_E(ZC_INVALID));
	CHECK(strstr(s.st.msg, "(gap)") != NULL);
	wait_gone(&e, op.id, 0);
	/* a slow link: late, whole and right */
	f = (struct zc_fault){ .kind = ZC_FAULT_DELAY, .delay_ns = 5000000 };
	zc_fault_arm(ZC_FP_PEER_SEND, NULL, &f);
	put_retrying(&e, &op, buf, len);
	zc_fault_disarm(ZC_FP_PEER_SEND, NULL);
	CHECK_EQ(cell_get(&e, op.id, 0, 0, false, back, len, &got, &st), 0);
	CHECK_EQ(got, len);
	CHECK(memcmp(buf, back, len) == 0);
	t_rpc_env_fini(&e, 1000);
	free(buf);
	free(back);
}
#endif

int
main(void)
{
	test_round_trip(RPC_MARSHAL_ZEROCOPY);
	test_round_trip(RPC_MARSHAL_COPY);
	test_refusals();
#ifdef ZC_FAULTS
	test_link_faults();
#endif
	printf("test_dn_rpc_cell: ok\n");
	return 0;
}
