/*
 * zest-admin: the operator's view of a zest cluster (docs/operations.md "Health").
 *
 *   zest-admin --cluster https://E:2379 --tls-ca ca.pem --tls-cert c.pem --tls-key c.key status
 *   zest-admin ... status --json
 *   zest-admin ... ok-to-stop dn-3 dn-4
 *   zest-admin ... nodes [--json]
 *   zest-admin ... drain dn-3 | undrain dn-3 | decommission dn-3      (admin_drain.c)
 *   zest-admin ... maintenance dn-3 --for 30m | maintenance dn-3 --end
 *
 * status reads the membership, the members, the cellcheck keys, the heal to-do keys and
 * every record (one serializable Range per 256), all at one etcd revision, and evaluates
 * every block group with cluster/cl_health.h. ok-to-stop does the same with the named nodes
 * counted as stopped.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "cl_etcd.h"
#include "cl_health.h"
#include "cl_members.h"
#include "admin_drain.h"
#include "zc.h"

#define EXIT_NOT_OK 1               /* ok-to-stop: no */
#define EXIT_ETCD   ADMIN_EXIT_ETCD /* etcd could not be read: no state */
#define EXIT_USAGE  64

struct admin_opts {
	const char *cluster;
	const char *ca, *cert, *key;
	bool insecure, json;
	unsigned k, m, quorum; /* 0: from the records (k, m) / k + 1 */
	unsigned timeout_ms;
	uint64_t for_s; /* maintenance --for */
	bool end;       /* maintenance --end */
};

enum {
	OPT_HELP = 256,
	OPT_VERSION,
	OPT_CLUSTER,
	OPT_CA,
	OPT_CERT,
	OPT_KEY,
	OPT_INSECURE,
	OPT_JSON,
	OPT_EC,
	OPT_QUORUM,
	OPT_TIMEOUT,
	OPT_FOR,
	OPT_END
};

static const struct option longopts[] = {
	{ "help", no_argument, NULL, OPT_HELP },
	{ "version", no_argument, NULL, OPT_VERSION },
	{ "cluster", required_argument, NULL, OPT_CLUSTER },
	{ "tls-ca", required_argument, NULL, OPT_CA },
	{ "tls-cert", required_argument, NULL, OPT_CERT },
	{ "tls-key", required_argument, NULL, OPT_KEY },
	/* the gateway's spelling of the same files */
	{ "cluster-ca", required_argument, NULL, OPT_CA },
	{ "cluster-cert", required_argument, NULL, OPT_CERT },
	{ "cluster-key", required_argument, NULL, OPT_KEY },
	{ "insecure", no_argument, NULL, OPT_INSECURE },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "ec", required_argument, NULL, OPT_EC },
	{ "write-quorum", required_argument, NULL, OPT_QUORUM },
	{ "timeout-ms", required_argument, NULL, OPT_TIMEOUT },
	{ "for", required_argument, NULL, OPT_FOR },
	{ "end", no_argument, NULL, OPT_END },
	{ NULL, 0, NULL, 0 },
};

static void
usage(FILE *f)
{
	fputs("usage: zest-admin --cluster URL[,...] (--tls-ca F --tls-cert F --tls-key F | "
	      "--insecure)\n"
	      "                  [--json] COMMAND\n"
	      "commands:\n"
	      "  status                 HEALTH_OK / HEALTH_WARN / HEALTH_ERR with reasons and\n"
	      "                         counts; exit 0 OK, 1 WARN, 2 ERR, 3 etcd unreadable\n"
	      "  ok-to-stop NODE...     exit 0 only if stopping NODE... now leaves every object\n"
	      "                         readable (every group keeps >= k available cells) and\n"
	      "                         new writes their quorum; else 1 with the reasons (a\n"
	      "                         live node in a maintenance window counts as stopping)\n"
	      "  drain NODE             place no new cell on NODE and move every cell it holds\n"
	      "                         to other nodes (it keeps serving reads meanwhile)\n"
	      "  undrain NODE           stop draining NODE (cells moved stay where they are)\n"
	      "  decommission NODE      drain NODE, then remove it from the cluster once no\n"
	      "                         record names a cell on it\n"
	      "  maintenance NODE --for DURATION\n"
	      "                         NODE may be absent that long (30m, 2h, 90s; at most 7d)\n"
	      "                         without its cells being rebuilt; writes place around it\n"
	      "  maintenance NODE --end end the window now\n"
	      "  nodes                  each node's zone, state (live, absent, unverified),\n"
	      "                         capacity, used, free (above its reserve) and cells\n"
	      "options:\n"
	      "  --cluster URL[,...]    etcd endpoints, https://HOST:PORT (TLS with the files\n"
	      "                         below) or HOST:PORT with --insecure (required)\n"
	      "  --tls-ca FILE          PEM cluster CA (also --cluster-ca)\n"
	      "  --tls-cert FILE        PEM client certificate of the CA (also --cluster-cert)\n"
	      "  --tls-key FILE         its private key (also --cluster-key)\n"
	      "  --insecure             plaintext etcd\n"
	      "  --json                 one JSON object on stdout (stable keys: state, reasons\n"
	      "                         [{code, severity, count, message}], nodes, objects, ...)\n"
	      "  --ec K+M               ok-to-stop: the datanodes' scheme for new writes\n"
	      "                         (default: the records' most common scheme, else 4+2)\n"
	      "  --write-quorum N       ok-to-stop: the datanodes' --write-quorum (default k+1)\n"
	      "  --timeout-ms N         deadline of each etcd call (default 5000)\n"
	      "  --for DURATION         maintenance: the window's length (a lease of that TTL)\n"
	      "  --end                  maintenance: end the window (delete its key)\n"
	      "  --help, --version\n",
	      f);
}

/* counts on the command line: at most a million */
static int
parse_uint(const char *s, unsigned *out)
{
	return zc_parse_uint(s, 1000000, out);
}

static int
parse_opts(int argc, char **argv, struct admin_opts *o)
{
	int c;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_HELP:
			usage(stdout);
			exit(0);
		case OPT_VERSION:
			printf("zest-admin %s\n", ZEST_VERSION);
			exit(0);
		case OPT_CLUSTER:
			o->cluster = optarg;
			break;
		case OPT_CA:
			o->ca = optarg;
			break;
		case OPT_CERT:
			o->cert = optarg;
			break;
		case OPT_KEY:
			o->key = optarg;
			break;
		case OPT_INSECURE:
			o->insecure = true;
			break;
		case OPT_JSON:
			o->json = true;
			break;
		case OPT_EC:
			if (sscanf(optarg, "%u+%u", &o->k, &o->m) != 2 || o->k < 1 ||
			    o->k + o->m > CL_REC_MAX_CELLS) {
				fprintf(stderr, "zest-admin: bad --ec %s (K+M)\n", optarg);
				return -EINVAL;
			}
			break;
		case OPT_QUORUM:
			if (parse_uint(optarg, &o->quorum))
				return -EINVAL;
			break;
		case OPT_TIMEOUT:
			if (parse_uint(optarg, &o->timeout_ms))
				return -EINVAL;
			break;
		case OPT_FOR:
			if (admin_parse_duration(optarg, &o->for_s)) {
				fprintf(stderr, "zest-admin: bad --for %s (30m, 2h, 90s; <= 7d)\n",
				        optarg);
				return -EINVAL;
			}
			break;
		case OPT_END:
			o->end = true;
			break;
		default:
			return -EINVAL;
		}
	}
	if (!o->cluster) {
		fprintf(stderr, "zest-admin: --cluster is required\n");
		return -EINVAL;
	}
	if (o->insecure && (o->ca || o->cert || o->key)) {
		fprintf(stderr, "zest-admin: --insecure and --tls-* exclude each other\n");
		return -EINVAL;
	}
	if (!o->insecure && strstr(o->cluster, "https://") != o->cluster) {
		fprintf(stderr,
		        "zest-admin: etcd endpoint %s is plaintext: give https:// "
		        "endpoints with --tls-ca/--tls-cert/--tls-key, or --insecure\n",
		        o->cluster);
		return -EINVAL;
	}
	if (!o->insecure && (!o->ca || !o->cert || !o->key)) {
		fprintf(stderr, "zest-admin: TLS to etcd needs --tls-ca, --tls-cert and "
		                "--tls-key (or --insecure)\n");
		return -EINVAL;
	}
	if (o->quorum && o->k && (o->quorum < o->k || o->quorum > o->k + o->m)) {
		fprintf(stderr, "zest-admin: --write-quorum must be within [%u, %u]\n", o->k,
		        o->k + o->m);
		return -EINVAL;
	}
	return 0;
}

static void
print_reasons_json(const struct cl_health_reason *r, size_t n)
{
	fputs("\"reasons\":[", stdout);
	for (size_t i = 0; i < n; i++) {
		printf("%s{\"code\":\"%s\",\"severity\":\"%s\",\"count\":%llu,\"message\":",
		       i ? "," : "", cl_health_code_name(r[i].code),
		       cl_health_state_name(r[i].severity), (unsigned long long)r[i].count);
		zc_json_string(stdout, r[i].message);
		fputc('}', stdout);
	}
	fputc(']', stdout);
}

static void
progress_fields(const struct cl_health_progress *p)
{
	printf("\"cells_left\":%llu,\"bytes_left\":%llu,\"rate_cells_per_s\":%.3f,\"eta_s\":",
	       (unsigned long long)p->cells, (unsigned long long)p->bytes, p->rate);
	if (p->eta_s >= 0)
		printf("%lld", (long long)p->eta_s);
	else
		fputs("null", stdout);
}

/* the rest of "heal" (its progress), then "drains" */
static void
print_progress_json(const struct cl_health *h)
{
	struct cl_health_progress p;
	bool first = true;

	cl_health_heal_progress(h, &p);
	progress_fields(&p);
	fputs("},\"drains\":[", stdout);
	for (size_t i = 0; i < h->nnodes; i++) {
		const struct cl_health_node *n = &h->nodes[i];

		if (!n->drain)
			continue;
		cl_health_drain_progress(h, n, &p);
		printf("%s{\"node\":", first ? "" : ",");
		zc_json_string(stdout, n->name);
		printf(",\"mode\":\"%s\",\"since\":%lld,\"counted\":%s,",
		       n->drain == CL_MEMBERS_DECOMMISSION ? "decommission" : "drain",
		       (long long)n->drain_since_s, p.known ? "true" : "false");
		progress_fields(&p);
		fputc('}', stdout);
		first = false;
	}
	fputc(']', stdout);
}

static void
print_body_json(const struct cl_health *h, uint64_t ranges)
{
	size_t members = 0;

	for (size_t i = 0; i < h->nnodes; i++)
		members += h->nodes[i].member;
	printf(",\"revision\":%lld,\"nodes\":{\"known\":%zu,\"members\":%zu,\"live\":%llu,"
	       "\"absent\":%llu,\"checking\":%llu,\"list\":[",
	       (long long)h->revision, h->nnodes, members,
	       (unsigned long long)cl_health_nodes_live(h),
	       (unsigned long long)cl_health_nodes_absent(h),
	       (unsigned long long)cl_health_nodes_checking(h));
	for (size_t i = 0; i < h->nnodes; i++) {
		const struct cl_health_node *n = &h->nodes[i];
		const char *drain = n->drain == CL_MEMBERS_DECOMMISSION ? "\"decommission\""
		                    : n->drain                          ? "\"drain\""
		                                                        : "null";

		printf("%s{\"name\":", i ? "," : "");
		zc_json_string(stdout, n->name);
		printf(",\"member\":%s,\"live\":%s,\"checked\":%s,\"stopping\":%s",
		       n->member ? "true" : "false", n->live ? "true" : "false",
		       n->checked ? "true" : "false", n->stopping ? "true" : "false");
		printf(",\"drain\":%s,\"maintenance_until\":", drain);
		if (n->maint_until_s)
			printf("%lld", (long long)n->maint_until_s);
		else
			fputs("null", stdout);
		if (n->has_stat)
			printf(",\"heal\":{\"passes\":%llu,\"pending_cells\":%llu,"
			       "\"pending_bytes\":%llu,\"healed_cells\":%llu,\"healed_bytes\":%llu,"
			       "\"own_cells\":%lld,\"own_bytes\":%lld,\"t_ms\":%llu}}",
			       (unsigned long long)n->stat.passes,
			       (unsigned long long)n->stat.pending_cells,
			       (unsigned long long)n->stat.pending_bytes,
			       (unsigned long long)n->stat.healed_cells,
			       (unsigned long long)n->stat.healed_bytes,
			       (long long)n->stat.own_cells, (long long)n->stat.own_bytes,
			       (unsigned long long)n->stat.t_ms);
		else
			fputs(",\"heal\":null}", stdout);
	}
	printf("]},\"objects\":{\"total\":%llu,\"ok\":%llu,\"degraded\":%llu,"
	       "\"unreadable\":%llu,\"unknown\":%llu,\"undecodable\":%llu,\"bytes\":%llu},"
	       "\"groups\":{\"total\":%llu,\"doubled\":%llu,\"unreadable\":%llu},"
	       "\"cells\":{\"missing\":%llu,\"absent\":%llu,\"unknown\":%llu},"
	       "\"heal\":{\"todo_keys\":%llu,\"locks\":%llu,",
	       (unsigned long long)h->objects, (unsigned long long)h->objects_ok,
	       (unsigned long long)h->objects_degraded, (unsigned long long)h->objects_unreadable,
	       (unsigned long long)h->objects_unknown, (unsigned long long)h->objects_bad,
	       (unsigned long long)h->bytes, (unsigned long long)h->groups,
	       (unsigned long long)h->groups_doubled, (unsigned long long)h->groups_unreadable,
	       (unsigned long long)h->cells_missing, (unsigned long long)h->cells_absent,
	       (unsigned long long)h->cells_unknown, (unsigned long long)h->todo_keys,
	       (unsigned long long)h->heal_locks);
	print_progress_json(h);
	printf(",\"cost\":{\"ranges\":%llu}", (unsigned long long)ranges);
}

/* The zones line of status: how many whole zones a group placed now may lose. */
static void
print_zones(const struct cl_health *h, bool json)
{
	unsigned k = 4, m = 2, zones;
	int t;

	cl_health_scheme(h, &k, &m);
	t = cl_health_zone_tolerance(h, k, m, false, &zones);
	if (json)
		printf(",\"zones\":{\"count\":%u,\"fault_tolerance\":%d,\"k\":%u,\"m\":%u}", zones,
		       t, k, m);
	else
		printf("zones:   %u with live nodes; a new RS(%u,%u) group may lose %d whole "
		       "zones\n",
		       zones, k, m, t);
}

static void
print_text(const struct cl_health *h, const struct cl_health_reason *r, size_t n)
{
	enum cl_health_state s = cl_health_state(h);

	printf("health: %s\n", cl_health_state_name(s));
	for (size_t i = 0; i < n; i++)
		printf("    [%s] %s: %s\n", cl_health_state_name(r[i].severity) + 7,
		       cl_health_code_name(r[i].code), r[i].message);
	printf("nodes:   %zu known, %llu live, %llu absent, %llu checking\n", h->nnodes,
	       (unsigned long long)cl_health_nodes_live(h),
	       (unsigned long long)cl_health_nodes_absent(h),
	       (unsigned long long)cl_health_nodes_checking(h));
	printf("objects: %llu (%llu bytes): %llu ok, %llu degraded, %llu unreadable, "
	       "%llu undecodable\n",
	       (unsigned long long)h->objects, (unsigned long long)h->bytes,
	       (unsigned long long)h->objects_ok, (unsigned long long)h->objects_degraded,
	       (unsigned long long)h->objects_unreadable, (unsigned long long)h->objects_bad);
	printf("heal:    %llu to-do keys, %llu objects being healed now\n",
	       (unsigned long long)h->todo_keys, (unsigned long long)h->heal_locks);
	print_zones(h, false);
	{
		struct cl_health_progress p;

		cl_health_heal_progress(h, &p);
		if (p.known) {
			printf("         %llu cells (%llu bytes) to heal or move, %.1f cells/s, "
			       "ETA ",
			       (unsigned long long)p.cells, (unsigned long long)p.bytes, p.rate);
			if (p.eta_s >= 0)
				printf("%lld s\n", (long long)p.eta_s);
			else
				puts(p.cells ? "unknown" : "0 s");
		}
	}
	for (size_t i = 0; i < h->nnodes; i++) {
		const struct cl_health_node *n = &h->nodes[i];
		struct cl_health_progress p;

		if (!n->drain)
			continue;
		cl_health_drain_progress(h, n, &p);
		printf("%s %s: ", n->drain == CL_MEMBERS_DECOMMISSION ? "decommission" : "drain",
		       n->name);
		if (!p.known)
			puts("cells left not counted yet");
		else if (p.eta_s >= 0)
			printf("%llu cells (%llu bytes) left, %.1f cells/s, ETA %lld s\n",
			       (unsigned long long)p.cells, (unsigned long long)p.bytes, p.rate,
			       (long long)p.eta_s);
		else
			printf("%llu cells (%llu bytes) left, %.1f cells/s, ETA unknown\n",
			       (unsigned long long)p.cells, (unsigned long long)p.bytes, p.rate);
	}
}

/* Read everything at one revision into h; a compaction in the middle reads again. */
static int
read_all(struct cl_etcd *c, const struct admin_opts *o, char **stops, int nstops,
         struct cl_health *h, uint64_t *ranges)
{
	int rc = 0;

	for (int attempt = 0; attempt < 3; attempt++) {
		cl_health_fini(h);
		cl_health_init(h);
		rc = cl_health_read_keys(c, h, o->timeout_ms);
		for (int i = 0; !rc && i < nstops; i++)
			if (cl_health_node_stop(h, stops[i]) != 0) {
				fprintf(stderr, "zest-admin: %s is neither a member nor live\n",
				        stops[i]);
				return -ENOENT;
			}
		/* a live node in a maintenance window is about to go: ok-to-stop counts it */
		for (size_t i = 0; !rc && nstops && i < h->nnodes; i++)
			if (h->nodes[i].maint_until_s && h->nodes[i].live)
				h->nodes[i].stopping = true;
		if (!rc)
			rc = cl_health_read_records(c, h, o->timeout_ms, ranges);
		if (rc != -ERANGE)
			break;
	}
	if (rc)
		fprintf(stderr, "zest-admin: cannot read etcd at %s: err=%d (%s)\n", o->cluster, rc,
		        rc <= -ZC_ERR_BASE ? zc_code_word(zc_err_code(rc)) : strerror(-rc));
	return rc;
}

static int
cmd_status(struct cl_etcd *c, const struct admin_opts *o)
{
	struct cl_health h;
	struct cl_health_reason r[CL_HEALTH_NCODES];
	uint64_t ranges = 0;
	size_t n;
	int rc;

	cl_health_init(&h);
	rc = read_all(c, o, NULL, 0, &h, &ranges);
	if (rc) {
		cl_health_fini(&h);
		return EXIT_ETCD;
	}
	n = cl_health_reasons(&h, r, CL_HEALTH_NCODES);
	if (o->json) {
		printf("{\"state\":\"%s\",", cl_health_state_name(cl_health_state(&h)));
		print_reasons_json(r, n);
		print_body_json(&h, ranges);
		print_zones(&h, true);
		fputs("}\n", stdout);
	} else {
		print_text(&h, r, n);
	}
	rc = (int)cl_health_state(&h);
	cl_health_fini(&h);
	return rc;
}

/* ok-to-stop's own reasons, beside the state's */
struct stop_reason {
	const char *code;
	uint64_t count;
	char message[400];
};

static int
cmd_ok_to_stop(struct cl_etcd *c, const struct admin_opts *o, char **stops, int nstops)
{
	struct cl_health h;
	struct stop_reason r[4];
	unsigned k = o->k ? o->k : 4, m = o->k ? o->m : 2, q, live_after = 0;
	uint64_t ranges = 0;
	size_t n = 0;
	int rc, tol;

	cl_health_init(&h);
	rc = read_all(c, o, stops, nstops, &h, &ranges);
	if (rc) {
		cl_health_fini(&h);
		return rc == -ENOENT ? EXIT_NOT_OK : EXIT_ETCD;
	}
	if (!o->k) /* the scheme of the records, when not given */
		cl_health_scheme(&h, &k, &m);
	q = o->quorum ? o->quorum : k + 1;
	if (q < k || q > k + m) {
		fprintf(stderr, "zest-admin: --write-quorum %u is outside [%u, %u] of RS(%u,%u)\n",
		        q, k, k + m, k, m);
		cl_health_fini(&h);
		return EXIT_USAGE;
	}
	for (size_t i = 0; i < h.nnodes; i++)
		live_after += h.nodes[i].live && !h.nodes[i].stopping;
	tol = cl_health_tolerance(k, m, live_after);
	if (cl_health_nodes_checking(&h) || h.objects_unknown || h.objects_bad) {
		r[n].code = "unknown";
		r[n].count = cl_health_nodes_checking(&h) + h.objects_unknown + h.objects_bad;
		snprintf(r[n].message, sizeof(r[n].message),
		         "state unknown: %llu nodes checking, %llu objects with unknown cells, "
		         "%llu records undecodable",
		         (unsigned long long)cl_health_nodes_checking(&h),
		         (unsigned long long)h.objects_unknown, (unsigned long long)h.objects_bad);
		n++;
	}
	if (h.objects_unreadable_after) {
		r[n].code = "objects_unreadable";
		r[n].count = h.objects_unreadable_after;
		snprintf(r[n].message, sizeof(r[n].message),
		         "%llu objects would have a group with fewer than k available cells "
		         "(%llu groups; first: %s)",
		         (unsigned long long)h.objects_unreadable_after,
		         (unsigned long long)h.groups_unreadable_after, h.first_bad);
		n++;
	}
	if (tol < (int)(q - k)) {
		r[n].code = "writes_refused";
		r[n].count = live_after;
		snprintf(r[n].message, sizeof(r[n].message),
		         "%u live nodes left: a new RS(%u,%u) group survives %d node losses, "
		         "the write quorum %u asks for %u",
		         live_after, k, m, tol, q, q - k);
		n++;
	}
	if (o->json) {
		printf("{\"ok\":%s,\"state\":\"%s\",\"stop\":[", n ? "false" : "true",
		       cl_health_state_name(cl_health_state(&h)));
		for (int i = 0; i < nstops; i++) {
			fputs(i ? "," : "", stdout);
			zc_json_string(stdout, stops[i]);
		}
		fputs("],\"reasons\":[", stdout);
		for (size_t i = 0; i < n; i++) {
			printf("%s{\"code\":\"%s\",\"count\":%llu,\"message\":", i ? "," : "",
			       r[i].code, (unsigned long long)r[i].count);
			zc_json_string(stdout, r[i].message);
			fputc('}', stdout);
		}
		printf("],\"live_after\":%u,\"tolerance_after\":%d,\"k\":%u,\"m\":%u,"
		       "\"write_quorum\":%u,\"objects_unreadable_after\":%llu",
		       live_after, tol, k, m, q, (unsigned long long)h.objects_unreadable_after);
		print_body_json(&h, ranges);
		fputs("}\n", stdout);
	} else {
		printf("%s to stop:", n ? "NOT ok" : "ok");
		for (int i = 0; i < nstops; i++)
			printf(" %s", stops[i]);
		printf(" (%llu objects, %u live nodes left)\n", (unsigned long long)h.objects,
		       live_after);
		for (size_t i = 0; i < n; i++)
			printf("    %s: %s\n", r[i].code, r[i].message);
	}
	cl_health_fini(&h);
	return n ? EXIT_NOT_OK : 0;
}

int
main(int argc, char **argv)
{
	struct admin_opts o = { .timeout_ms = CL_ETCD_DEFAULT_TIMEOUT_MS };
	struct cl_etcd_opts eo = { 0 };
	struct cl_etcd *c;
	const char *cmd;
	int rc;

	zc_log_init();
	if (parse_opts(argc, argv, &o)) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (optind >= argc) {
		fprintf(stderr, "zest-admin: no command (status, ok-to-stop NODE..., nodes, drain, "
		                "undrain, decommission, maintenance NODE)\n");
		return EXIT_USAGE;
	}
	cmd = argv[optind];
	if (!admin_drain_is_cmd(cmd) &&
	    (strcmp(cmd, "status") == 0 || strcmp(cmd, "nodes") == 0
	             ? optind + 1 != argc
	             : strcmp(cmd, "ok-to-stop") != 0 || optind + 1 == argc)) {
		fprintf(stderr, "zest-admin: bad command line: status | ok-to-stop NODE... | nodes | "
		                "drain|undrain|decommission NODE | maintenance NODE "
		                "(--for D | --end)\n");
		return EXIT_USAGE;
	}
	eo.timeout_ms = o.timeout_ms;
	eo.ca_file = o.ca;
	eo.cert_file = o.cert;
	eo.key_file = o.key;
	rc = cl_etcd_create(o.cluster, &eo, &c);
	if (rc) {
		fprintf(stderr, "zest-admin: bad --cluster %s or TLS files: err=%d\n", o.cluster,
		        rc);
		return EXIT_USAGE;
	}
	if (admin_drain_is_cmd(cmd))
		rc = admin_drain_run(c, cmd, argv + optind + 1, argc - optind - 1,
		                     &(struct admin_drain_opts){ .for_s = o.for_s,
		                                                 .end = o.end,
		                                                 .json = o.json,
		                                                 .timeout_ms = o.timeout_ms });
	else if (strcmp(cmd, "status") == 0)
		rc = cmd_status(c, &o);
	else if (strcmp(cmd, "nodes") == 0)
		rc = admin_cmd_nodes(c,
		                     &(struct rpc_tls){ .ca_file = o.ca,
		                                        .cert_file = o.cert,
		                                        .key_file = o.key,
		                                        .insecure = o.insecure },
		                     o.json, o.timeout_ms);
	else
		rc = cmd_ok_to_stop(c, &o, argv + optind + 1, argc - optind - 1);
	cl_etcd_destroy(c);
	return rc;
}
