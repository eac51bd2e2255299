/*
 * The coordinator of cluster writes (datanode/dn_coord*.c) in one process: a real etcd
 * (tests/lib/etcd_test.h), three nodes n0..n2, each a store over temp folders; n1 and n2
 * serve the cell calls (the binding and an rpc server on a loopback port, plaintext),
 * n0 coordinates RS(2,1) writes fed as random refcounted "receive slices". The faults are
 * the rpc client's fault point "peer.send" on the links to the peers (zc_fault.h), so
 * each failure is deterministic:
 *   - the cells' lengths are the single-node layout's (dn_geom_file_len), the quorum rule;
 *   - a write commits one record naming the cells' nodes, the cells end committed on
 *     their nodes (CommitCells, dn_cell_commit), an overwrite retires the old cells;
 *   - with a tiny grace: a write that keeps making progress for more than twice the
 *     grace refreshes its pending cells on every node and commits; one that stalls past
 *     half the grace is refused on its next byte and its cells deleted; one whose peer
 *     goes away midway gives that peer's cells up when it misses a refresh and commits;
 *   - a peer's stream reset mid-write: committed with its cells missing, none left there;
 *   - a peer that never sees its stream end: given up after the peer timeout, missing;
 *   - a slow peer with a small window: the write waits for it and commits;
 *   - 4+2 over the three: two cells of each group per node, fault tolerance 1;
 *   - both peers failing: ZC_NO_QUORUM, and every cell written is deleted;
 *   - etcd gone at the commit: 503, the cells stay pending (the collector's case).
 * Every case ends with no live payload ref and no live gRPC buffer.
 */
#include "dn_rpc.h"
#include "rpc_stats.h"
#include "rpc_server.h"
#include "rpc_client.h"

#include "dn_test.h" /* after rpc.h: with its client helpers */
#include "dn_coord_internal.h"
#include "etcd_test.h"
#include "cl_meta.h"
#include "t_fault.h"
#include "zc_crc.h"

#define K    2
#define M    1
#define CELL 16384u
#define SPG  2u
#define S(x) x, strlen(x)

struct peer {
	struct t_env t;
	struct dn_rpc *b;
	struct rpc_server *srv;
	char name[8], addr[64];
};

static struct t_etcd etcd;
static struct cl_etcd *ec;
static struct cl_members *members;
static struct t_env n0;
static struct peer peers[2];
static struct dn_coord *coord;

/* ------------------------------------------------------------------ layout, quorum */

static void
test_layout(void)
{
	static const unsigned ks[] = { 1, 2, 4, 6 };
	static const uint32_t spgs[] = { 1, 2, 16 };

	for (unsigned a = 0; a < 4; a++)
		for (unsigned b = 0; b < 3; b++)
			for (unsigned t = 0; t < 200; t++) {
				struct dn_geom g = { .k = ks[a],
					             .m = 2,
					             .cell = 4096,
					             .spg = spgs[b],
					             .chunk = 4096,
					             .short_parity = true };
				uint64_t gb = (uint64_t)g.k * g.cell * g.spg, sum = 0;

				/* around every boundary, and random sizes */
				g.size = t < 100 ? (t / 4) * (gb / 3) + (t % 4) - 1
				                 : t_rand() % (8 * gb);
				if (t == 0)
					g.size = 0;
				CHECK_EQ(dn_coord_ngroups(g.size, g.k, g.cell, g.spg),
				         dn_geom_ngroups(&g));
				for (uint32_t gi = 0; gi < dn_geom_ngroups(&g); gi++)
					for (unsigned c = 0; c < g.k + g.m; c++) {
						uint64_t l = dn_coord_cell_len(g.size, g.k, g.cell,
						                               g.spg, gi, c);

						CHECK_EQ(l, dn_geom_file_len(&g, gi, c));
						if (c < g.k)
							sum += l;
					}
				CHECK_EQ(sum, g.size);
			}
	/* 4+2 on six nodes, quorum 5: one cell may go, not two (node counts:
	 * test_dn_coord_quorum) */
	{
		const unsigned six[6] = { 0, 1, 2, 3, 4, 5 };

		CHECK(dn_coord_quorum_ok(six, 6, 0x3f, 4, 5));
		CHECK(dn_coord_quorum_ok(six, 6, 0x3e, 4, 5));
		CHECK(!dn_coord_quorum_ok(six, 6, 0x3c, 4, 5));
		CHECK(dn_coord_quorum_ok(six, 6, 0x3c, 4, 4));
		CHECK(!dn_coord_quorum_ok(six, 6, 0x38, 4, 4));
	}
}

/* ------------------------------------------------------------------ the cluster */

static void
put_node(const char *name, const char *addr)
{
	struct cl_rec_node n = { .name = (char *)name,
		                 .address = (char *)addr,
		                 .incarnation = 7,
		                 .state = CL_REC_NODE_UP };
	char key[64];
	uint8_t *buf;
	size_t len;

	snprintf(key, sizeof(key), "%s%s", CL_MEMBERS_NODES_PREFIX, name);
	CHECK_EQ(cl_rec_node_encode(&n, &buf, &len, NULL, 0), 0);
	CHECK_EQ(cl_etcd_put(ec, S(key), buf, len, 0, NULL, 0), 0);
	free(buf);
}

/* Out of line: inlined into up(), GCC misjudges the folder names' room and warns. */
static __attribute__((noinline)) void
store_up(struct t_env *t)
{
	t_env_init(t, 3, K, M);
	t_open(t);
}

/* Peer i's binding and rpc server on a fresh loopback port, registered in etcd. */
static void
peer_serve(unsigned i)
{
	struct peer *p = &peers[i];
	struct dn_rpc_opts bo = { .write_workers = 2, .readers = 1 };
	struct rpc_server_opts so = { .listen = "127.0.0.1:0",
		                      .cq_threads = 1,
		                      .marshaller = RPC_MARSHAL_ZEROCOPY,
		                      .tls.insecure = true };
	struct rpc_server_handlers h;

	CHECK_EQ(dn_rpc_create(p->t.s, &bo, &p->b, &h), 0);
	CHECK_EQ(rpc_server_create(&so, &h, &p->srv), 0);
	snprintf(p->name, sizeof(p->name), "n%u", i + 1);
	snprintf(p->addr, sizeof(p->addr), "127.0.0.1:%d", rpc_server_port(p->srv));
	put_node(p->name, p->addr);
}

static void
up(void)
{
	uint64_t end = zc_now_ns() + 60000000000ull;

	t_etcd_start(&etcd, 1);
	CHECK_EQ(cl_etcd_create(etcd.endpoints, NULL, &ec), 0);
	while (cl_etcd_put(ec, S("ready"), S("1"), 0, NULL, 1000) != 0) {
		CHECK(zc_now_ns() < end);
		usleep(100 * 1000);
	}
	store_up(&n0);
	put_node("n0", "127.0.0.1:1"); /* never dialled: its cells are local */
	for (unsigned i = 0; i < 2; i++) {
		store_up(&peers[i].t);
		peer_serve(i);
	}
	CHECK_EQ(cl_members_create(ec, 100, &members), 0);
	CHECK_EQ(cl_members_refresh(members), 3);
	CHECK_EQ(cl_meta_bucket_create(ec, "bkt", 1, 0), 0);
	CHECK_EQ(dn_coord_create(&(struct dn_coord_opts){ .store = n0.s,
	                                                  .etcd = ec,
	                                                  .members = members,
	                                                  .node = "n0",
	                                                  .k = K,
	                                                  .m = M,
	                                                  .cell_size = CELL,
	                                                  .stripes_per_group = SPG,
	                                                  .write_quorum = 2,
	                                                  .gc_grace_ns = 600000000000ull,
	                                                  .tls.insecure = true,
	                                                  .peer_timeout_ms = 500,
	                                                  .peer_window = 64 << 10,
	                                                  .parity_bufs = 8 },
	                         &coord),
	         0);
}

static struct dn_store *
store_of(const char *node)
{
	if (!strcmp(node, "n0"))
		return n0.s;
	return peers[node[1] - '1'].t.s;
}

/* Arm f on the coordinator's link to peer ("peer.send", instance its target; the hit is
 * a stream's message number, the open's first); NULL: disarm. */
static void
fault(unsigned peer, const struct zc_fault *f)
{
	CHECK(dn_coord_peer(coord, peers[peer].name, peers[peer].addr));
	t_fault(ZC_FP_PEER_SEND, peers[peer].addr, f);
}

static size_t max_slice = 5000; /* the slices put() cuts */

/* Write buf as bkt/key through the coordinator, in random slices. */
static int
put(const char *key, const uint8_t *buf, size_t len, char *msg, size_t cap)
{
	struct dn_coord_result res;
	struct dn_coord_write *w;
	size_t at = 0;
	int rc;

	rc = dn_coord_begin(coord, "bkt", key, len, true, 0, 0, &w, msg, cap);
	if (rc)
		return rc;
	while (at < len) {
		struct zc_seg segs[8];
		uint64_t off = at;
		unsigned n = t_slices_next(buf, &at, len, max_slice, segs, 8);
		uint32_t crc = 0;

		for (unsigned i = 0; i < n; i++)
			crc = zc_crc32c(crc, segs[i].ptr, segs[i].len);
		rc = dn_coord_data(w, off, segs, n, crc, msg, cap);
		for (unsigned i = 0; i < n; i++)
			zc_ref_put(segs[i].ref);
		if (rc) {
			dn_coord_abort(w);
			return rc;
		}
	}
	rc = dn_coord_commit(w, "etag-1", NULL, 0, NULL, &res, msg, cap);
	if (!rc)
		CHECK(res.size == len && res.crc32c == zc_crc32c(0, buf, len));
	dn_coord_end(w);
	return rc;
}

/* dn_read_cb into a flat buffer (arg), at the chunk's offset. */
static int
t_copy_cb(void *arg, uint64_t offset, const struct zc_seg *seg)
{
	memcpy((uint8_t *)arg + offset, seg->ptr, seg->len);
	return 0;
}

static void
get_record(const char *key, struct cl_rec_object *o)
{
	CHECK_EQ(cl_meta_get(ec, "bkt", key, false, o, NULL, 0), 0);
	CHECK_EQ(o->nextents, 1);
}

/* The cell's state on the node the record names: 1 committed, 2 pending, 3 retired (kept
 * for readers of a replaced record), 0 absent. */
static int
cell_state(const struct cl_rec_extent *e, uint32_t g, unsigned c)
{
	struct dn_cell_info info;
	int rc = dn_cell_stat(store_of(e->nodes[e->groups[g].cell[c]]),
	                      (struct dn_cell_id){ e->id, g, c }, &info);

	if (rc == ZC_E(ZC_NO_KEY))
		return 0;
	CHECK_EQ(rc, 0);
	rc = info.retired ? 3 : info.pending ? 2 : 1;
	dn_cell_info_fini(&info);
	return rc;
}

/* Wait until every cell of e not missing is in state want (the follow-up calls are
 * asynchronous), the missing ones absent. */
static void
wait_cells(const struct cl_rec_extent *e, int want)
{
	uint64_t end = zc_now_ns() + 60000000000ull;

	for (;;) {
		bool all = true;

		for (uint32_t g = 0; g < e->ngroups; g++)
			for (unsigned c = 0; c < e->k + e->m; c++)
				if (cell_state(e, g, c) !=
				    (e->groups[g].missing & (1u << c) ? 0 : want))
					all = false;
		if (all)
			return;
		CHECK(zc_now_ns() < end);
		usleep(20 * 1000);
	}
}

static size_t
ncells(struct dn_store *s)
{
	struct dn_cell_info *v;
	size_t n;

	CHECK_EQ(dn_cell_list(s, NULL, 0, &v, &n), 0);
	dn_cell_list_free(v, n);
	return n;
}

static void
wait_ncells(const size_t *want)
{
	uint64_t end = zc_now_ns() + 60000000000ull;

	while (ncells(n0.s) != want[0] || ncells(peers[0].t.s) != want[1] ||
	       ncells(peers[1].t.s) != want[2]) {
		CHECK(zc_now_ns() < end);
		usleep(20 * 1000);
	}
}

/* The peers whose cells the record marks missing, as bits (1: n1, 2: n2). */
static unsigned
missing_peers(const struct cl_rec_extent *e)
{
	unsigned out = 0;

	for (uint32_t g = 0; g < e->ngroups; g++)
		for (unsigned c = 0; c < e->k + e->m; c++)
			if (e->groups[g].missing & (1u << c)) {
				const char *n = e->nodes[e->groups[g].cell[c]];

				CHECK(strcmp(n, "n0")); /* the local cells never fail here */
				out |= 1u << (n[1] - '1');
			}
	return out;
}

static void
test_writes(void)
{
	size_t len = 5 * K * CELL * SPG / 2 + 333; /* 2 full groups and a short one */
	uint8_t *buf = malloc(len);
	struct cl_rec_object o, o2;
	char msg[RPC_STATUS_MSG_MAX];
	size_t before[3];
	int rc;

	t_fill(buf, len);

	/* all up: one record, three distinct nodes per group, cells committed */
	CHECK_EQ(put("k", buf, len, msg, sizeof(msg)), 0);
	get_record("k", &o);
	CHECK_EQ(o.size, len);
	CHECK_EQ(o.extents[0].ngroups, 3);
	CHECK_EQ(missing_peers(&o.extents[0]), 0);
	for (uint32_t g = 0; g < 3; g++) {
		const uint16_t *c = o.extents[0].groups[g].cell;

		CHECK(c[0] != c[1] && c[1] != c[2] && c[0] != c[2]);
	}
	wait_cells(&o.extents[0], 1);

	/* an overwrite: the old record's cells are retired (DeleteCells, local retires),
	 * kept for the GETs still reading them until the collectors' read grace */
	CHECK_EQ(put("k", buf, len, msg, sizeof(msg)), 0);
	get_record("k", &o2);
	CHECK(o2.extents[0].id != o.extents[0].id);
	wait_cells(&o.extents[0], 3);
	wait_cells(&o2.extents[0], 1);
	cl_rec_object_fini(&o);
	cl_rec_object_fini(&o2);

	/* n1's streams reset at their second message: committed, n1's cells missing
	 * and none of this extent left on n1 */
	fault(0, &(struct zc_fault){ .kind = ZC_FAULT_RESET, .from = 2, .count = 1 });
	CHECK_EQ(put("reset", buf, len, msg, sizeof(msg)), 0);
	fault(0, NULL);
	get_record("reset", &o);
	CHECK_EQ(missing_peers(&o.extents[0]), 1);
	wait_cells(&o.extents[0], 1);
	cl_rec_object_fini(&o);

	/* n2 never sees its streams end (the commit message dropped): after the peer
	 * timeout the coordinator gives up on them */
	fault(1, &(struct zc_fault){ .kind = ZC_FAULT_DROP,
	                             .from = 3,
	                             .count = 1 }); /* open + data, data, commit */
	CHECK_EQ(put("drop", buf, 2 * K * CELL * SPG, msg, sizeof(msg)), 0);
	fault(1, NULL);
	get_record("drop", &o);
	CHECK_EQ(missing_peers(&o.extents[0]), 2);
	wait_cells(&o.extents[0], 1);
	cl_rec_object_fini(&o);

	/* a slow peer behind a 64 KiB window: the write waits for it, nothing missing */
	fault(0, &(struct zc_fault){ .kind = ZC_FAULT_DELAY, .delay_ns = 30000000 });
	CHECK_EQ(put("slow", buf, len, msg, sizeof(msg)), 0);
	fault(0, NULL);
	get_record("slow", &o);
	CHECK_EQ(missing_peers(&o.extents[0]), 0);
	cl_rec_object_fini(&o);

	/* both peers fail: the quorum (2 of 3) is lost; every cell written goes */
	wait_ncells((size_t[]){ ncells(n0.s), ncells(peers[0].t.s), ncells(peers[1].t.s) });
	before[0] = ncells(n0.s);
	before[1] = ncells(peers[0].t.s);
	before[2] = ncells(peers[1].t.s);
	fault(0, &(struct zc_fault){ .kind = ZC_FAULT_RESET, .from = 3, .count = 1 });
	fault(1, &(struct zc_fault){ .kind = ZC_FAULT_RESET, .from = 3, .count = 1 });
	CHECK_EQ(put("lost", buf, len, msg, sizeof(msg)), ZC_E(ZC_NO_QUORUM));
	CHECK(strstr(msg, "write quorum not met"));
	fault(0, NULL);
	fault(1, NULL);
	CHECK_EQ(cl_meta_get(ec, "bkt", "lost", false, &o, NULL, 0), ZC_E(ZC_NO_KEY));
	wait_ncells(before);

	/* a missing bucket: refused before any cell is written */
	{
		struct dn_coord_write *w;

		CHECK_EQ(dn_coord_begin(coord, "nob", "k", 10, true, 0, 0, &w, msg, sizeof(msg)),
		         ZC_E(ZC_NO_BUCKET));
		CHECK_EQ(dn_coord_begin(coord, "bkt", "k", 10, false, 0, 0, &w, msg, sizeof(msg)),
		         ZC_E(ZC_INVALID));
	}

	/* etcd gone at the commit: 503 SlowDown (ZC_UNAVAILABLE, not the cells' NO_QUORUM),
	 * the cells stay pending for the collector to settle by what the record says */
	memset(coord->buckets, 0, sizeof(coord->buckets)); /* "bkt" seen just now */
	CHECK_EQ(dn_coord_bucket_check(coord, "bkt", msg, sizeof(msg)), 0);
	t_etcd_kill(&etcd, 0);
	rc = put("noetcd", buf, len, msg, sizeof(msg));
	CHECK_EQ(rc, ZC_E(ZC_UNAVAILABLE));
	CHECK(ncells(n0.s) + ncells(peers[0].t.s) + ncells(peers[1].t.s) ==
	      before[0] + before[1] + before[2] + 3 * (K + M));
	free(buf);
}

/* 4+2 over three nodes: the rounds rule puts two cells of each group on every node, and
 * the fault tolerance is one node. */
static void
test_few_nodes(void)
{
	struct dn_coord *c2 = coord, *wide;
	size_t len = 3 * 4 * CELL * SPG / 2 + 5;
	uint8_t *buf = malloc(len);
	char msg[RPC_STATUS_MSG_MAX], *text = NULL;
	struct cl_rec_object o;
	size_t tlen = 0;
	FILE *f;

	t_fill(buf, len);
	CHECK_EQ(dn_coord_create(&(struct dn_coord_opts){ .store = n0.s,
	                                                  .etcd = ec,
	                                                  .members = members,
	                                                  .node = "n0",
	                                                  .k = 4,
	                                                  .m = 2,
	                                                  .cell_size = CELL,
	                                                  .stripes_per_group = SPG,
	                                                  .tls.insecure = true,
	                                                  .peer_timeout_ms = 2000 },
	                         &wide),
	         0);
	coord = wide;
	CHECK_EQ(put("wide", buf, len, msg, sizeof(msg)), 0);
	get_record("wide", &o);
	CHECK_EQ(o.extents[0].k, 4);
	CHECK_EQ(o.extents[0].nnodes, 3);
	for (uint32_t g = 0; g < o.extents[0].ngroups; g++) {
		unsigned per[3] = { 0 };

		for (unsigned c = 0; c < 6; c++)
			per[o.extents[0].groups[g].cell[c]]++;
		CHECK(per[0] == 2 && per[1] == 2 && per[2] == 2);
	}
	wait_cells(&o.extents[0], 1);
	cl_rec_object_fini(&o);
	f = open_memstream(&text, &tlen);
	dn_coord_metrics(wide, f);
	fclose(f);
	CHECK(strstr(text, "zest_cluster_fault_tolerance_nodes 1\n"));
	free(text);
	coord = c2;
	dn_coord_destroy(wide);
	free(buf);
}

/* The coordinator's own drives below their reserve while its registration still shows
 * room: RS(1,1) over the three nodes, n0 in every group's placement; its cell of the first
 * group moves to the node left before any byte, the later groups go around n0, and the
 * write commits with no cell missing and none on n0. */
static void
test_full_self(void)
{
	struct dn_coord *c2 = coord, *two;
	size_t len = 3 * CELL * SPG + 5;
	uint8_t *buf = malloc(len);
	char msg[RPC_STATUS_MSG_MAX];
	struct cl_rec_object o;

	t_fill(buf, len);
	CHECK_EQ(dn_coord_create(&(struct dn_coord_opts){ .store = n0.s,
	                                                  .etcd = ec,
	                                                  .members = members,
	                                                  .node = "n0",
	                                                  .k = 1,
	                                                  .m = 1,
	                                                  .cell_size = CELL,
	                                                  .stripes_per_group = SPG,
	                                                  .tls.insecure = true,
	                                                  .peer_timeout_ms = 2000 },
	                         &two),
	         0);
	coord = two;
	n0.s->o.cell_reserve = 1ull << 62;
	CHECK_EQ(put("full", buf, len, msg, sizeof(msg)), 0);
	n0.s->o.cell_reserve = 0;
	get_record("full", &o);
	CHECK_EQ(o.extents[0].ngroups, 4);
	for (size_t x = 0; x < o.extents[0].nnodes; x++)
		CHECK(strcmp(o.extents[0].nodes[x], "n0") != 0);
	for (uint32_t g = 0; g < o.extents[0].ngroups; g++) {
		const struct cl_rec_group *gr = &o.extents[0].groups[g];

		CHECK_EQ(gr->missing, 0);
		CHECK(gr->cell[0] != gr->cell[1]);
	}
	wait_cells(&o.extents[0], 1);
	cl_rec_object_fini(&o);
	coord = c2;
	dn_coord_destroy(two);
	free(buf);
}

/* 4 MiB cells, fed in slices of up to 3 MiB (as the copy marshaller's one buffer per
 * chunk): parity and data go out in messages of at most 1 MiB, and the cells hold the
 * bytes. */
static void
test_big_cells(void)
{
	struct dn_coord *c2 = coord, *big;
	uint32_t cell = 4u << 20;
	size_t len = 2 * 2 * (size_t)cell + 7;
	uint8_t *buf = malloc(len), *back = malloc(cell);
	char msg[RPC_STATUS_MSG_MAX];
	struct cl_rec_object o;

	t_fill(buf, len);
	CHECK_EQ(dn_coord_create(&(struct dn_coord_opts){ .store = n0.s,
	                                                  .etcd = ec,
	                                                  .members = members,
	                                                  .node = "n0",
	                                                  .k = 2,
	                                                  .m = 1,
	                                                  .cell_size = cell,
	                                                  .stripes_per_group = 1,
	                                                  .tls.insecure = true },
	                         &big),
	         0);
	CHECK_EQ(big->npbufs, 16); /* 64 MiB of 4 MiB cells */
	coord = big;
	max_slice = 3u << 20;
	CHECK_EQ(put("big", buf, len, msg, sizeof(msg)), 0);
	max_slice = 5000;
	get_record("big", &o);
	CHECK_EQ(o.extents[0].ngroups, 3);
	CHECK_EQ(missing_peers(&o.extents[0]), 0);
	wait_cells(&o.extents[0], 1);
	/* group 1's data cell 1 is bytes [3 cells, 4 cells) */
	{
		const struct cl_rec_extent *e = &o.extents[0];
		struct dn_store *st = store_of(e->nodes[e->groups[1].cell[1]]);

		CHECK_EQ(dn_cell_read(st, (struct dn_cell_id){ e->id, 1, 1 }, 0, cell, true,
		                      t_copy_cb, back),
		         0);
		CHECK(memcmp(back, buf + 3 * (size_t)cell, cell) == 0);
	}
	cl_rec_object_fini(&o);
	coord = c2;
	dn_coord_destroy(big);
	free(buf);
	free(back);
}

/* Every cell of extent id, on every node: how many entries, and how many touched after
 * their creation (the coordinator's refresh). */
static unsigned
extent_cells(uint64_t id, unsigned *touched)
{
	struct dn_store *st[3] = { n0.s, peers[0].t.s, peers[1].t.s };
	unsigned n = 0;

	*touched = 0;
	for (unsigned i = 0; i < 3; i++) {
		struct dn_cell_info *v;
		size_t nv;

		CHECK_EQ(dn_cell_list(st[i], NULL, 0, &v, &nv), 0);
		for (size_t j = 0; j < nv; j++)
			if (v[j].id.extent == id) {
				n++;
				*touched += v[j].touched_ns > v[j].created_ns;
			}
		dn_cell_list_free(v, nv);
	}
	return n;
}

/* Feed buf[from, to) to w in slices, pausing pause_us before each: a slow client that
 * keeps sending. */
static int
feed(struct dn_coord_write *w, const uint8_t *buf, size_t from, size_t to, unsigned pause_us,
     char *msg, size_t cap)
{
	size_t at = from;

	while (at < to) {
		struct zc_seg segs[8];
		uint64_t off = at;
		unsigned n = t_slices_next(buf, &at, to, 4096, segs, 8);
		uint32_t crc = 0;
		int rc;

		for (unsigned i = 0; i < n; i++)
			crc = zc_crc32c(crc, segs[i].ptr, segs[i].len);
		if (pause_us)
			usleep(pause_us);
		rc = dn_coord_data(w, off, segs, n, crc, msg, cap);
		for (unsigned i = 0; i < n; i++)
			zc_ref_put(segs[i].ref);
		if (rc)
			return rc;
	}
	return 0;
}

static void
test_grace(void)
{
	const uint64_t grace = 2000000000ull; /* 2 s: a touch every 0.5 s, commit within 1 s */
	struct dn_coord *c2 = coord, *tiny;
	size_t len = 6 * K * CELL * SPG; /* six groups */
	uint8_t *buf = malloc(len);
	char msg[RPC_STATUS_MSG_MAX];
	struct dn_coord_result res;
	struct dn_coord_write *w;
	struct cl_rec_object o;
	unsigned touched, n;
	uint64_t t0, id;

	t_fill(buf, len);
	CHECK_EQ(dn_coord_create(&(struct dn_coord_opts){ .store = n0.s,
	                                                  .etcd = ec,
	                                                  .members = members,
	                                                  .node = "n0",
	                                                  .k = K,
	                                                  .m = M,
	                                                  .cell_size = CELL,
	                                                  .stripes_per_group = SPG,
	                                                  .write_quorum = 2,
	                                                  .gc_grace_ns = grace,
	                                                  .tls.insecure = true,
	                                                  .peer_timeout_ms = 2000 },
	                         &tiny),
	         0);
	coord = tiny;

	/* progress all the time, for longer than twice the grace (measured, not assumed:
	 * the pause is stretched until it is) */
	CHECK_EQ(dn_coord_begin(coord, "bkt", "slow", len, true, 0, 0, &w, msg, sizeof(msg)), 0);
	t0 = zc_now_ns();
	CHECK_EQ(feed(w, buf, 0, len / 2, 50000, msg, sizeof(msg)), 0);
	while (zc_now_ns() - t0 < 2 * grace) {
		size_t at = w->written;

		CHECK(at < len);
		CHECK_EQ(feed(w, buf, at, at + 4096, 100000, msg, sizeof(msg)), 0);
	}
	CHECK_EQ(feed(w, buf, w->written, len, 20000, msg, sizeof(msg)), 0);
	CHECK(zc_now_ns() - t0 > 2 * grace);
	id = w->id;
	CHECK(w->touch_ns > w->first_ns + grace / 2); /* the old rule would refuse it */
	CHECK_EQ(dn_coord_commit(w, "etag-s", NULL, 0, NULL, &res, msg, sizeof(msg)), 0);
	dn_coord_end(w);
	get_record("slow", &o);
	CHECK_EQ(o.extents[0].id, id);
	CHECK_EQ(missing_peers(&o.extents[0]), 0);
	wait_cells(&o.extents[0], 1);
	n = extent_cells(id, &touched);
	CHECK_EQ(n, 6 * (K + M));
	CHECK(touched > 0); /* the first groups' cells on every node were refreshed */
	cl_rec_object_fini(&o);

	/* stalled past half the grace after its last refresh: refused on its next byte, not
	 * as an etcd deadline, and every cell it wrote deleted */
	CHECK_EQ(dn_coord_begin(coord, "bkt", "stalled", len, true, 0, 0, &w, msg, sizeof(msg)), 0);
	CHECK_EQ(feed(w, buf, 0, len / 2, 0, msg, sizeof(msg)), 0);
	id = w->id;
	/* the ended groups' cells get recorded (their answers are asynchronous) */
	for (uint64_t end = zc_now_ns() + 60000000000ull; extent_cells(id, &touched) < K + M;) {
		CHECK(zc_now_ns() < end);
		usleep(20 * 1000);
	}
	usleep((useconds_t)(grace / 1000)); /* the stall: a whole grace */
	CHECK_EQ(feed(w, buf, len / 2, len, 0, msg, sizeof(msg)), ZC_E(ZC_UNAVAILABLE));
	CHECK(strstr(msg, "past its commit deadline") != NULL);
	dn_coord_abort(w);
	for (uint64_t end = zc_now_ns() + 60000000000ull; extent_cells(id, &touched);) {
		CHECK(zc_now_ns() < end);
		usleep(20 * 1000);
	}
	CHECK_EQ(cl_meta_get(ec, "bkt", "stalled", false, &o, NULL, 0), ZC_E(ZC_NO_KEY));

	/* a peer lost in the middle of a long write, after some of its cells were recorded:
	 * it misses a touch, its cells count as missing, and the write (RS(2,1), quorum 2:
	 * the two others suffice) goes on past the grace and commits */
	CHECK_EQ(dn_coord_begin(coord, "bkt", "peer-lost", len, true, 0, 0, &w, msg, sizeof(msg)),
	         0);
	CHECK_EQ(feed(w, buf, 0, len / 3, 0, msg, sizeof(msg)), 0);
	id = w->id;
	for (uint64_t end = zc_now_ns() + 60000000000ull; extent_cells(id, &touched) < K + M;) {
		CHECK(zc_now_ns() < end);
		usleep(20 * 1000);
	}
	rpc_server_destroy(peers[1].srv, 1000);
	dn_rpc_destroy(peers[1].b);
	t0 = zc_now_ns();
	while (zc_now_ns() - t0 < 2 * grace) {
		size_t at = w->written;

		CHECK(at < len);
		CHECK_EQ(feed(w, buf, at, at + 4096, 100000, msg, sizeof(msg)), 0);
	}
	CHECK_EQ(feed(w, buf, w->written, len, 20000, msg, sizeof(msg)), 0);
	CHECK_EQ(dn_coord_commit(w, "etag-l", NULL, 0, NULL, &res, msg, sizeof(msg)), 0);
	dn_coord_end(w);
	get_record("peer-lost", &o);
	CHECK_EQ(o.extents[0].id, id);
	for (uint32_t g = 0; g < o.extents[0].ngroups; g++) {
		const struct cl_rec_extent *e = &o.extents[0];

		for (unsigned c = 0; c < K + M; c++)
			CHECK(!strcmp(e->nodes[e->groups[g].cell[c]], "n2") ==
			      !!(e->groups[g].missing & (1u << c)));
	}
	cl_rec_object_fini(&o);
	peer_serve(1); /* back, on a new port, for the tests after this one */
	CHECK_EQ(cl_members_refresh(members), 3);

	coord = c2;
	dn_coord_destroy(tiny);
	free(buf);
}

int
main(void)
{
	zc_log_init();
	test_layout();
	if (!t_etcd_available()) {
		printf("SKIP: %s not found (Debian package etcd-server)\n", t_etcd_bin());
		return 77;
	}
	t_require_uring();
	up();
	test_few_nodes();
	test_full_self();
	test_grace();
	test_big_cells();
	test_writes();
	dn_coord_destroy(coord);
	cl_members_destroy(members);
	for (unsigned i = 0; i < 2; i++) {
		rpc_server_destroy(peers[i].srv, 1000);
		dn_rpc_destroy(peers[i].b);
		t_env_fini(&peers[i].t);
	}
	t_env_fini(&n0);
	cl_etcd_destroy(ec);
	t_etcd_stop(&etcd);
	CHECK_EQ(zc_ref_live(), 0);
	CHECK_EQ(rpc_live_buffers(), 0);
	printf("ok\n");
	return 0;
}
