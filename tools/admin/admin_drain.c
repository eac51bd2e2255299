/*
 * zest-admin drain | undrain | decommission | maintenance (docs/operations.md "Retire a
 * node", "Maintenance window"): each writes or deletes one key that every datanode's
 * membership reads (cl_members.h "Marks"); the healers do the rest.
 *
 *   drain NODE          /zest/drain/NODE = "drain <unix s>"
 *   decommission NODE   /zest/drain/NODE = "decommission <unix s>"
 *   undrain NODE        delete /zest/drain/NODE
 *   maintenance NODE --for 30m   /zest/maintenance/NODE = "<until unix s>", under a lease
 *                                of that TTL (the window ends by itself)
 *   maintenance NODE --end       delete it (and revoke its lease)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin_drain.h"
#include "cl_etcd.h"
#include "cl_members.h"
#include "cl_rec.h"
#include "zc.h"

#define EXIT_REFUSED 1
#define EXIT_ETCD    3
#define EXIT_USAGE   64
#define MEMBERS      "/zest/members/"
#define MAX_WINDOW_S (7 * 86400ull) /* a week: longer is a decommission, not a window */

bool
admin_drain_is_cmd(const char *cmd)
{
	return !strcmp(cmd, "drain") || !strcmp(cmd, "undrain") || !strcmp(cmd, "decommission") ||
	       !strcmp(cmd, "maintenance");
}

int
admin_parse_duration(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	uint64_t mul = 1;

	if (!s || !*s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	if (*end) {
		if (end[1])
			return -EINVAL;
		switch (*end) {
		case 's':
			break;
		case 'm':
			mul = 60;
			break;
		case 'h':
			mul = 3600;
			break;
		case 'd':
			mul = 86400;
			break;
		default:
			return -EINVAL;
		}
	}
	if (v == 0 || v > MAX_WINDOW_S / mul)
		return -EINVAL;
	*out = v * mul;
	return 0;
}

static int
report_etcd(const char *what, int rc)
{
	fprintf(stderr, "zest-admin: %s: etcd err=%d (%s)\n", what, rc,
	        rc <= -ZC_ERR_BASE ? zc_code_word(zc_err_code(rc)) : strerror(-rc));
	return EXIT_ETCD;
}

/* Is name a node of this cluster (a member key, or a live registration)? 1, 0 or an error. */
static int
known_node(struct cl_etcd *c, const char *name, unsigned timeout_ms)
{
	const char *prefixes[] = { MEMBERS, CL_MEMBERS_NODES_PREFIX };

	for (size_t i = 0; i < 2; i++) {
		char key[64 + CL_REC_MAX_NAME];
		struct cl_etcd_kvs kvs = { 0 };
		int n = snprintf(key, sizeof(key), "%s%s", prefixes[i], name);
		int rc = cl_etcd_get(c, key, (size_t)n, false, &kvs, timeout_ms);

		cl_etcd_kvs_fini(&kvs);
		if (rc == 0)
			return 1;
		if (!zc_err_is(rc, ZC_NO_KEY))
			return rc;
	}
	return 0;
}

static void
done(const struct admin_drain_opts *o, const char *cmd, const char *node, const char *key,
     const char *value, int64_t until)
{
	if (o->json) {
		printf("{\"command\":");
		zc_json_string(stdout, cmd);
		printf(",\"node\":");
		zc_json_string(stdout, node);
		printf(",\"key\":");
		zc_json_string(stdout, key);
		printf(",\"value\":");
		if (value)
			zc_json_string(stdout, value);
		else
			fputs("null", stdout);
		if (until)
			printf(",\"until\":%lld", (long long)until);
		puts("}");
	} else if (value) {
		printf("%s %s: %s = \"%s\"\n", cmd, node, key, value);
	} else {
		printf("%s %s: %s deleted\n", cmd, node, key);
	}
}

/* Delete key; for a maintenance key its lease too (nothing else lives under it). */
static int
delete_key(struct cl_etcd *c, const char *key, bool revoke, unsigned timeout_ms)
{
	struct cl_etcd_range r = { .key = key, .key_len = strlen(key) };
	struct cl_etcd_kvs kvs = { 0 };
	int rc = 0;

	if (revoke) {
		rc = cl_etcd_get(c, key, strlen(key), false, &kvs, timeout_ms);
		if (rc == 0 && kvs.kv[0].lease)
			rc = cl_etcd_lease_revoke(c, kvs.kv[0].lease, timeout_ms);
		cl_etcd_kvs_fini(&kvs);
		if (zc_err_is(rc, ZC_NO_KEY))
			rc = 0;
		if (rc)
			return rc;
	}
	return cl_etcd_delete(c, &r, NULL, NULL, timeout_ms);
}

int
admin_drain_run(struct cl_etcd *c, const char *cmd, char **args, int nargs,
                const struct admin_drain_opts *o)
{
	bool maint = !strcmp(cmd, "maintenance");
	const char *node;
	char key[64 + CL_REC_MAX_NAME], value[64];
	int64_t now = (int64_t)time(NULL), until = 0, lease = 0, ttl;
	int rc;

	if (nargs != 1 || !cl_rec_node_name_ok(args[0])) {
		fprintf(stderr, "zest-admin: %s takes one node name\n", cmd);
		return EXIT_USAGE;
	}
	if (maint && (o->end == (o->for_s != 0))) {
		fprintf(stderr, "zest-admin: maintenance NODE takes --for DURATION or --end\n");
		return EXIT_USAGE;
	}
	if (!maint && (o->end || o->for_s)) {
		fprintf(stderr, "zest-admin: --for and --end are maintenance's\n");
		return EXIT_USAGE;
	}
	node = args[0];
	snprintf(key, sizeof(key), "%s%s",
	         maint ? CL_MEMBERS_MAINT_PREFIX : CL_MEMBERS_DRAIN_PREFIX, node);
	if (!strcmp(cmd, "undrain") || (maint && o->end)) {
		rc = delete_key(c, key, maint, o->timeout_ms);
		if (rc)
			return report_etcd(cmd, rc);
		done(o, cmd, node, key, NULL, 0);
		return 0;
	}
	rc = known_node(c, node, o->timeout_ms);
	if (rc < 0)
		return report_etcd(cmd, rc);
	if (rc == 0) {
		fprintf(stderr, "zest-admin: %s is neither a member nor live\n", node);
		return EXIT_REFUSED;
	}
	if (maint) {
		until = now + (int64_t)o->for_s;
		snprintf(value, sizeof(value), "%lld", (long long)until);
		rc = cl_etcd_lease_grant(c, (int64_t)o->for_s, &lease, &ttl, o->timeout_ms);
		if (rc)
			return report_etcd("maintenance lease", rc);
	} else {
		snprintf(value, sizeof(value), "%s %lld", cmd, (long long)now);
	}
	rc = cl_etcd_put(c, key, strlen(key), value, strlen(value), lease, NULL, o->timeout_ms);
	if (rc)
		return report_etcd(cmd, rc);
	done(o, cmd, node, key, value, until);
	return 0;
}
