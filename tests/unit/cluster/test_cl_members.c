/*
 * cl_members against a real etcd 3.4 (tests/lib/etcd_test.h): the view lists the
 * NodeInfo values under /zest/nodes/ in name order, leaves out values that do not decode
 * or sit under another name's key, follows deletes and expiring leases, keeps old views
 * valid while held, and keeps the last view when etcd goes away.
 * Skips (77) without /usr/bin/etcd.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cl_rec.h"
#include "cl_etcd.h"
#include "cl_members.h"
#include "zc.h"
#include "etcd_test.h"
#include "t_check.h"

#define S(x) x, strlen(x)

static void
put_node(struct cl_etcd *c, const char *key, const char *name, const char *addr, int64_t lease)
{
	struct cl_rec_node n = { .name = (char *)name,
		                 .address = (char *)addr,
		                 .incarnation = 7,
		                 .state = CL_REC_NODE_UP };
	uint8_t *buf;
	size_t len;

	CHECK_EQ(cl_rec_node_encode(&n, &buf, &len, NULL, 0), 0);
	CHECK_EQ(cl_etcd_put(c, S(key), buf, len, lease, NULL, 0), 0);
	free(buf);
}

static void
wait_ready(struct cl_etcd *c)
{
	uint64_t end = zc_now_ns() + 60000000000ull;

	while (cl_etcd_put(c, S("ready"), S("1"), 0, NULL, 1000) != 0) {
		CHECK(zc_now_ns() < end);
		usleep(100 * 1000);
	}
}

int
main(void)
{
	const struct cl_members_view *v, *old;
	struct cl_members *m;
	struct cl_etcd *c;
	struct t_etcd e;
	int64_t lease;
	struct cl_etcd_range del = { .key = "/zest/nodes/dn-a", .key_len = 16 };
	uint64_t end;

	zc_log_init();
	if (!t_etcd_available()) {
		printf("SKIP: %s not found (Debian package etcd-server)\n", t_etcd_bin());
		return 77;
	}
	t_etcd_start(&e, 1);
	CHECK_EQ(cl_etcd_create(e.endpoints, NULL, &c), 0);
	wait_ready(c);

	/* nobody yet: an empty view that has read etcd */
	CHECK_EQ(cl_members_create(c, 200, &m), 0);
	v = cl_members_get(m);
	CHECK_EQ(v->n, 0);
	CHECK(v->revision > 0);
	cl_members_view_put(v);

	put_node(c, "/zest/nodes/dn-c", "dn-c", "127.0.0.3:7000", 0);
	put_node(c, "/zest/nodes/dn-a", "dn-a", "127.0.0.1:7000", 0);
	put_node(c, "/zest/nodes/dn-x", "dn-b", "127.0.0.2:7000", 0); /* wrong key */
	CHECK_EQ(cl_etcd_put(c, S("/zest/nodes/dn-z"), S("\x0a\x50garbage"), 0, NULL, 0), 0);
	CHECK_EQ(cl_etcd_put(c, S("/zest/nodesX"), S("not a node key"), 0, NULL, 0), 0);
	CHECK_EQ(cl_members_refresh(m), 2);
	old = cl_members_get(m);
	CHECK_EQ(old->n, 2);
	CHECK(!strcmp(old->names[0], "dn-a") && !strcmp(old->names[1], "dn-c"));
	CHECK(!strcmp(old->nodes[1].address, "127.0.0.3:7000"));
	CHECK(old->names[0] == old->nodes[0].name);

	/* a delete, and a leased node whose lease expires: the thread notices both */
	CHECK_EQ(cl_etcd_delete(c, &del, NULL, NULL, 0), 0);
	CHECK_EQ(cl_etcd_lease_grant(c, 1, &lease, NULL, 0), 0);
	put_node(c, "/zest/nodes/dn-d", "dn-d", "127.0.0.4:7000", lease);
	end = zc_now_ns() + 60000000000ull;
	for (;;) {
		v = cl_members_get(m);
		if (v->n == 2 && !strcmp(v->names[0], "dn-c") && !strcmp(v->names[1], "dn-d"))
			break;
		cl_members_view_put(v);
		CHECK(zc_now_ns() < end);
		usleep(50 * 1000);
	}
	cl_members_view_put(v);
	end = zc_now_ns() + 60000000000ull; /* TTL 1 s, raised to etcd's minimum */
	for (;;) {
		v = cl_members_get(m);
		if (v->n == 1)
			break;
		cl_members_view_put(v);
		CHECK(zc_now_ns() < end);
		usleep(100 * 1000);
	}
	CHECK(!strcmp(v->names[0], "dn-c"));
	cl_members_view_put(v);
	/* the view taken before all this is unchanged */
	CHECK_EQ(old->n, 2);
	CHECK(!strcmp(old->names[0], "dn-a"));

	/* etcd gone: refresh fails, the last view stays */
	t_etcd_stop(&e);
	CHECK(cl_members_refresh(m) < 0);
	v = cl_members_get(m);
	CHECK_EQ(v->n, 1);
	cl_members_destroy(m); /* views still held stay valid */
	CHECK(!strcmp(v->names[0], "dn-c"));
	cl_members_view_put(v);
	cl_members_view_put(old);
	cl_etcd_destroy(c);
	printf("ok\n");
	return 0;
}
