/*
 * zest-admin nodes: per node zone, state, space and cells (admin.h). The keys and the
 * records are read at one etcd revision (cl_health.h); a registration counts as live only
 * once a mutual-TLS connection to it found a certificate naming it (cl_members.h), as the
 * datanodes judge it: else it is "unverified".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "cl_health.h"
#include "cl_members.h"
#include "zc.h"

/* "12.3G": bytes in a column, powers of 1024. */
static const char *
human(uint64_t b, char *buf, size_t cap)
{
	static const char unit[] = "BKMGTPE";
	double v = (double)b;
	unsigned u = 0;

	while (v >= 1024 && u < sizeof(unit) - 2) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, cap, "%lluB", (unsigned long long)b);
	else
		snprintf(buf, cap, "%.1f%c", v, unit[u]);
	return buf;
}

static const char *
state_of(const struct cl_health_node *n, const struct cl_members_view *v)
{
	if (!n->live)
		return "absent";
	for (size_t i = 0; v && i < v->n; i++)
		if (strcmp(v->names[i], n->name) == 0)
			return "live";
	return v ? "unverified" : "live";
}

/* Read keys and records at one revision; a compaction in the middle reads again. */
static int
read_health(struct cl_etcd *c, struct cl_health *h, unsigned timeout_ms)
{
	int rc = 0;

	for (int attempt = 0; attempt < 3; attempt++) {
		cl_health_fini(h);
		cl_health_init(h);
		rc = cl_health_read_keys(c, h, timeout_ms);
		if (!rc)
			rc = cl_health_read_records(c, h, timeout_ms, NULL);
		if (rc != -ERANGE)
			break;
	}
	return rc;
}

static void
print_json(const struct cl_health *h, const struct cl_members_view *v, unsigned k, unsigned m,
           unsigned zones, int zft)
{
	printf("{\"revision\":%lld,\"k\":%u,\"m\":%u,\"zones\":%u,\"fault_tolerance_zones\":%d,"
	       "\"nodes\":[",
	       (long long)h->revision, k, m, zones, zft);
	for (size_t i = 0; i < h->nnodes; i++) {
		const struct cl_health_node *n = &h->nodes[i];

		printf("%s{\"name\":", i ? "," : "");
		zc_json_string(stdout, n->name);
		fputs(",\"zone\":", stdout);
		if (n->zone)
			zc_json_string(stdout, n->zone);
		else
			fputs("null", stdout);
		printf(",\"state\":\"%s\",\"member\":%s,\"checked\":%s,\"capacity_bytes\":%llu,"
		       "\"used_bytes\":%llu,\"free_bytes\":%llu,\"cells\":%llu}",
		       state_of(n, v), n->member ? "true" : "false", n->checked ? "true" : "false",
		       (unsigned long long)n->capacity_bytes, (unsigned long long)n->used_bytes,
		       (unsigned long long)n->free_bytes, (unsigned long long)n->cells);
	}
	fputs("]}\n", stdout);
}

static void
print_text(const struct cl_health *h, const struct cl_members_view *v, unsigned k, unsigned m,
           unsigned zones, int zft)
{
	char a[16], b[16], f[16];

	printf("%-20s %-16s %-10s %9s %9s %9s %10s\n", "NODE", "ZONE", "STATE", "CAPACITY", "USED",
	       "FREE", "CELLS");
	for (size_t i = 0; i < h->nnodes; i++) {
		const struct cl_health_node *n = &h->nodes[i];

		printf("%-20s %-16s %-10s %9s %9s %9s %10llu\n", n->name, n->zone ? n->zone : "-",
		       state_of(n, v), human(n->capacity_bytes, a, sizeof(a)),
		       human(n->used_bytes, b, sizeof(b)), human(n->free_bytes, f, sizeof(f)),
		       (unsigned long long)n->cells);
	}
	printf("zones: %u with live nodes; a new RS(%u,%u) group may lose %d whole zones\n", zones,
	       k, m, zft);
}

int
admin_cmd_nodes(struct cl_etcd *c, const struct rpc_tls *tls, bool json, unsigned timeout_ms)
{
	struct cl_members *mem = NULL;
	const struct cl_members_view *v = NULL;
	struct cl_health h;
	unsigned k = 4, m = 2, zones;
	int rc, zft;

	cl_health_init(&h);
	rc = read_health(c, &h, timeout_ms);
	if (rc) {
		fprintf(stderr, "zest-admin: cannot read etcd: err=%d (%s)\n", rc,
		        rc <= -ZC_ERR_BASE ? zc_code_word(zc_err_code(rc)) : strerror(-rc));
		cl_health_fini(&h);
		return ADMIN_EXIT_ETCD;
	}
	/* the identity check, as the datanodes' views make it */
	if (tls && !tls->insecure &&
	    cl_members_create_opts(c, &(struct cl_members_opts){ .tls = tls }, &mem) == 0)
		v = cl_members_get(mem);
	cl_health_scheme(&h, &k, &m);
	zft = cl_health_zone_tolerance(&h, k, m, false, &zones);
	if (json)
		print_json(&h, v, k, m, zones, zft);
	else
		print_text(&h, v, k, m, zones, zft);
	cl_members_view_put(v);
	cl_members_destroy(mem);
	cl_health_fini(&h);
	return 0;
}
