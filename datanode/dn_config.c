/* Command-line flags of zest-datanode (issue 4, item 1): defaults, then the --config file
 * (common/zc_conf.h), then long flags. */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "dn_cells.h"
#include "dn_daemon.h"
#include "dn.h"
#include "dn_scrub.h"
#include "zc_conf.h"

enum {
	OPT_LISTEN = 256,
	OPT_DRIVE,
	OPT_EC,
	OPT_CELL,
	OPT_MARSHALLER,
	OPT_DISCARD,
	OPT_METRICS,
	OPT_QUORUM,
	OPT_SPG,
	OPT_INFLIGHT,
	OPT_L1,
	OPT_L2,
	OPT_L3,
	OPT_HEAL_DRIVE,
	OPT_WORKERS,
	OPT_READERS,
	OPT_CALL_CAP,
	OPT_GRACE,
	OPT_HEAL_INTERVAL,
	OPT_TLS_CA,
	OPT_TLS_CERT,
	OPT_TLS_KEY,
	OPT_INSECURE,
	OPT_UNIX_SOCKET,
	OPT_CLUSTER,
	OPT_NODE,
	OPT_ADVERTISE,
	OPT_GC_GRACE,
	OPT_READ_GRACE,
	OPT_DATA_IO,
	OPT_HEAL_AFTER,
	OPT_SCRUB_RATE,
	OPT_SCRUB_INTERVAL,
	OPT_ZONE,
	OPT_RESERVE,
	OPT_HELP,
	OPT_VERSION,
};

static const struct option long_opts[] = {
	{ "listen", required_argument, NULL, OPT_LISTEN },
	{ "drive", required_argument, NULL, OPT_DRIVE },
	{ "ec", required_argument, NULL, OPT_EC },
	{ "cell-size", required_argument, NULL, OPT_CELL },
	{ "marshaller", required_argument, NULL, OPT_MARSHALLER },
	{ "discard", no_argument, NULL, OPT_DISCARD },
	{ "metrics", required_argument, NULL, OPT_METRICS },
	{ "write-quorum", required_argument, NULL, OPT_QUORUM },
	{ "stripes-per-group", required_argument, NULL, OPT_SPG },
	{ "inflight-cap", required_argument, NULL, OPT_INFLIGHT },
	{ "admission-l1", required_argument, NULL, OPT_L1 },
	{ "admission-l2", required_argument, NULL, OPT_L2 },
	{ "admission-l3", required_argument, NULL, OPT_L3 },
	{ "heal-drive", required_argument, NULL, OPT_HEAL_DRIVE },
	{ "write-workers", required_argument, NULL, OPT_WORKERS },
	{ "readers", required_argument, NULL, OPT_READERS },
	{ "call-queue-cap", required_argument, NULL, OPT_CALL_CAP },
	{ "shutdown-grace", required_argument, NULL, OPT_GRACE },
	{ "heal-interval", required_argument, NULL, OPT_HEAL_INTERVAL },
	{ "tls-ca", required_argument, NULL, OPT_TLS_CA },
	{ "tls-cert", required_argument, NULL, OPT_TLS_CERT },
	{ "tls-key", required_argument, NULL, OPT_TLS_KEY },
	{ "insecure", no_argument, NULL, OPT_INSECURE },
	{ "unix-socket", required_argument, NULL, OPT_UNIX_SOCKET },
	{ "cluster", required_argument, NULL, OPT_CLUSTER },
	{ "node", required_argument, NULL, OPT_NODE },
	{ "advertise", required_argument, NULL, OPT_ADVERTISE },
	{ "gc-grace", required_argument, NULL, OPT_GC_GRACE },
	{ "read-grace", required_argument, NULL, OPT_READ_GRACE },
	/* In the order of the enum: the error message finds a flag's name by its value. */
	{ "data-io", required_argument, NULL, OPT_DATA_IO },
	{ "heal-after", required_argument, NULL, OPT_HEAL_AFTER },
	{ "scrub-rate", required_argument, NULL, OPT_SCRUB_RATE },
	{ "scrub-interval", required_argument, NULL, OPT_SCRUB_INTERVAL },
	{ "zone", required_argument, NULL, OPT_ZONE },
	{ "reserve", required_argument, NULL, OPT_RESERVE },
	{ "help", no_argument, NULL, OPT_HELP },
	{ "version", no_argument, NULL, OPT_VERSION },
	{ NULL, 0, NULL, 0 },
};

static const char usage_text[] =
        "usage: zest-datanode [heal] [flags]\n"
        "  heal                       rebuild missing cells on every drive, then exit\n"
        "  --config FILE              settings read before the flags: one `name = value`\n"
        "                             a line, the names of the flags below without --\n"
        "                             (`insecure = true`); `#` comment lines; a flag given\n"
        "                             on the command line wins (default: none)\n"
        "  --listen HOST:PORT         gRPC address (default 127.0.0.1:7070)\n"
        "  --drive DIR                a drive folder; repeat, at least k+m (required)\n"
        "  --ec K+M                   erasure-coding scheme (default 4+2)\n"
        "  --cell-size SIZE           cell size, multiple of 64KiB (default 1MiB)\n"
        "  --marshaller zerocopy|copy payload marshaller (default zerocopy)\n"
        "  --data-io direct|buffered  data cells copied once into aligned buffers and\n"
        "                             written O_DIRECT (default; every drive must accept\n"
        "                             O_DIRECT), or through the page cache, zero-copy\n"
        "                             from the payload\n"
        "  --discard                  accept and drop payload (transport benchmark)\n"
        "  --metrics HOST:PORT        serve Prometheus /metrics (default off)\n"
        "  --write-quorum N           durable cells per group to commit (default k+1);\n"
        "                             with --cluster: each group must survive losing any\n"
        "                             N-k nodes\n"
        "  --stripes-per-group N      block-group size in stripes (default 16)\n"
        "  --inflight-cap SIZE        payload bytes in flight to drives (default 1GiB)\n"
        "  --admission-l1 DURATION    write latency above which writes are paced (default "
        "50ms)\n"
        "  --admission-l2 DURATION    ... above which Write calls queue (default 200ms)\n"
        "  --admission-l3 DURATION    ... above which they are refused (default 1s)\n"
        "  --heal-drive N             with heal: rebuild only drive N (0-based; default "
        "all)\n"
        "  --write-workers N          threads running Write calls, 1..256 (default 4)\n"
        "  --readers N                threads streaming Read calls, 1..256 (default 4)\n"
        "  --call-queue-cap SIZE      payload queued per Write call before it pauses,\n"
        "                             64KiB..1GiB (default 8MiB)\n"
        "  --shutdown-grace DURATION  on SIGTERM, time in-flight calls get to finish,\n"
        "                             0..10min (default 5s)\n"
        "  --heal-interval DURATION   rebuild cells writes left missing on drives that are\n"
        "                             writable again, this often; 0 off (default 60s)\n"
        "  --tls-ca FILE              PEM cluster CA: gRPC clients must present a\n"
        "                             certificate it signed (mutual TLS)\n"
        "  --tls-cert FILE            PEM certificate of this datanode, signed by the CA\n"
        "  --tls-key FILE             PEM private key of --tls-cert\n"
        "  --insecure                 plaintext gRPC, anyone who reaches the port may read\n"
        "                             and delete everything (warned at start)\n"
        "                             (the three --tls-* flags or --insecure are required)\n"
        "  --unix-socket PATH         also serve on this Unix socket, for a gateway on this\n"
        "                             host (--datanode unix:PATH): no TLS, the socket file\n"
        "                             is private to this user (mode 0700) (default: none)\n"
        "  --cluster URL[,...]        cluster mode: register in etcd at these endpoints,\n"
        "                             https://HOST:PORT (TLS with the --tls-* files);\n"
        "                             plaintext HOST:PORT only with --insecure\n"
        "                             (docs/cluster.md; default off: single-node)\n"
        "  --node NAME                with --cluster: this node's name, [A-Za-z0-9._-]\n"
        "  --advertise HOST:PORT      with --cluster: the address others dial (default:\n"
        "                             --listen with its bound port)\n"
        "  --zone NAME                with --cluster: this node's failure domain (rack,\n"
        "                             room), [A-Za-z0-9._-]; a group's cells spread over\n"
        "                             zones (default: the node name, a zone per node)\n"
        "  --reserve SIZE             with --cluster: space kept free on each drive; a\n"
        "                             drive with less free takes no new cells, and\n"
        "                             placement weighs nodes by free space above it\n"
        "                             (default 1GiB)\n"
        "  --gc-grace DURATION        with --cluster: pending cells older than this are\n"
        "                             settled against etcd, 1s..7d (default 10min)\n"
        "  --read-grace DURATION      with --cluster: a replaced or deleted version's\n"
        "                             cells stay this long after their last read,\n"
        "                             1s..7d (default: --gc-grace)\n"
        "  --heal-after DURATION      with --cluster: a node absent this long has its\n"
        "                             cells rebuilt elsewhere, 1s..30d (default 10min)\n"
        "  --scrub-rate RATE          read every stored cell back and check its CRCs at\n"
        "                             most this fast: MiB/s, or a size per second\n"
        "                             (512KiB/s); 0 off (default 16)\n"
        "  --scrub-interval DURATION  a scrub pass starts this often, 1s..30d (days as\n"
        "                             7d); 0 off (default 7d)\n"
        "  --help                     this text\n"
        "  --version                  print the version\n";

static void
usage(FILE *out)
{
	fputs(usage_text, out);
}

/* A bad value's message ends with the flag's own --help lines: its range and default. */
static void
usage_of(const char *name, FILE *err)
{
	char key[64];
	const char *p, *e;

	/* at a line's start: "--listen" also appears inside --advertise's text */
	snprintf(key, sizeof(key), "\n  --%s ", name);
	p = strstr(usage_text, key);
	if (!p)
		return;
	p++;
	do {
		e = strchr(p, '\n');
		fprintf(err, "%.*s\n", (int)(e - p), p);
		p = e + 1;
	} while (!strncmp(p, "                             ", 29));
}

/* The merged arguments (file, then argv) live as long as the config's strings: to exit. */
static struct zc_conf conf;

/* counts on the command line: at most a million */
static int
parse_uint(const char *s, unsigned *out)
{
	return zc_parse_uint(s, 1000000, out);
}

/* --scrub-rate: MiB/s as a bare number, else a size per second ("512KiB", "1GiB/s"). */
static int
parse_rate(const char *s, uint64_t *out)
{
	char buf[64], *end;
	size_t n = strlen(s);
	double v;

	if (n >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, n + 1);
	if (n > 2 && !strcmp(buf + n - 2, "/s"))
		buf[n - 2] = 0;
	errno = 0;
	v = strtod(buf, &end);
	if (end != buf && !*end && !errno && v >= 0 && v <= 65536) {
		*out = (uint64_t)(v * 1048576.0);
		return 0;
	}
	return zc_parse_size(buf, out);
}

/* --scrub-interval: a duration, also in days ("7d"). */
static int
parse_days(const char *s, uint64_t *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (end != s && !strcmp(end, "d") && !errno && v >= 0 && v <= 365) {
		*out = (uint64_t)(v * 86400e9);
		return 0;
	}
	return zc_parse_duration_ns(s, out);
}

static int
parse_ec(const char *s, unsigned *k, unsigned *m)
{
	char buf[32], *plus;

	if (strlen(s) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, s);
	plus = strchr(buf, '+');
	if (!plus)
		return -EINVAL;
	*plus = 0;
	if (parse_uint(buf, k) || parse_uint(plus + 1, m) || *k == 0 || *m == 0 ||
	    *k + *m > EC_MAX_CELLS)
		return -EINVAL;
	return 0;
}

/* Which flags go together; the files themselves are checked when the server starts. A
 * heal run serves nothing and needs none of them. */
static int
check_tls(const struct dn_config *c, FILE *err)
{
	const struct rpc_tls *t = &c->tls;
	bool any = t->ca_file || t->cert_file || t->key_file;

	if (t->insecure && any) {
		fprintf(err, "zest-datanode: --insecure and --tls-ca/--tls-cert/--tls-key exclude "
		             "each other\n");
		return -EINVAL;
	}
	if (any && !(t->ca_file && t->cert_file && t->key_file)) {
		fprintf(err, "zest-datanode: mutual TLS needs all of --tls-ca, --tls-cert and "
		             "--tls-key\n");
		return -EINVAL;
	}
	if (!any && !t->insecure && !c->heal) {
		fprintf(err, "zest-datanode: no gRPC security given: pass --tls-ca FILE --tls-cert "
		             "FILE --tls-key FILE (mutual TLS with the cluster CA; "
		             "tools/zest-certs.sh makes a test CA), or --insecure for plaintext "
		             "that anyone reaching the port can use\n");
		return -EINVAL;
	}
	return 0;
}

/* etcd holds every object's record and the membership: plaintext etcd is asked for with
 * --insecure, like plaintext gRPC. Every endpoint must say https:// otherwise (the etcd
 * client presents the --tls-* files to it). */
static int
check_etcd_tls(const struct dn_config *c, FILE *err)
{
	const char *p = c->cluster;

	if (!p || c->tls.insecure)
		return 0;
	for (;;) {
		if (strncmp(p, "https://", 8)) {
			fprintf(err,
			        "zest-datanode: etcd endpoint in --cluster %s is plaintext: anyone "
			        "reaching it can read and rewrite every record; give https:// "
			        "endpoints (etcd with TLS and client certificates, "
			        "docs/operations.md), or --insecure for plaintext etcd and gRPC\n",
			        c->cluster);
			return -EINVAL;
		}
		p = strchr(p, ',');
		if (!p)
			return 0;
		p++;
	}
}

int
dn_config_parse(struct dn_config *c, int argc, char **argv, FILE *out, FILE *err)
{
	int opt;

	memset(c, 0, sizeof(*c));
	c->listen = "127.0.0.1:7070";
	c->k = 4;
	c->m = 2;
	c->cell_size = 1 << 20;
	c->zerocopy = true;
	c->data_direct = true; /* measured: docs/benchmarks.md, "Data cells" */
	c->stripes_per_group = 16;
	c->inflight_cap = 1ull << 30;
	c->adm_l1_ns = 50000000;
	c->adm_l2_ns = 200000000;
	c->adm_l3_ns = 1000000000;
	c->heal_drive = -1;
	c->write_workers = 4;
	c->readers = 4;
	c->call_cap = 8u << 20;
	c->grace_ns = 5000000000ull;
	c->heal_interval_ns = 60000000000ull;
	c->gc_grace_ns = 600000000000ull;
	c->heal_after_ns = 600000000000ull;
	c->reserve = 1ull << 30;
	c->scrub_rate = DN_SCRUB_DEFAULT_RATE;
	c->scrub_every_ns = DN_SCRUB_DEFAULT_INTERVAL;
	c->heal = argc > 1 && strcmp(argv[1], "heal") == 0;
	zc_conf_fini(&conf);
	if (zc_conf_load(&conf, argc, argv, c->heal ? 2 : 1, long_opts, "zest-datanode", err))
		return -EINVAL;
	c->config = conf.path;
	argc = conf.argc;
	argv = conf.argv;
	if (c->heal) {
		argv++;
		argc--;
	}
	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "", long_opts, NULL)) != -1) {
		int bad = 0;

		switch (opt) {
		case OPT_LISTEN:
			c->listen = optarg;
			break;
		case OPT_DRIVE:
			if (c->ndrives == DN_MAX_DRIVES)
				bad = -EINVAL;
			else
				c->drives[c->ndrives++] = optarg;
			break;
		case OPT_EC:
			bad = parse_ec(optarg, &c->k, &c->m);
			break;
		case OPT_CELL:
			bad = zc_parse_size(optarg, &c->cell_size);
			if (!bad && (c->cell_size == 0 || c->cell_size % (64 << 10) ||
			             c->cell_size > (1u << 30)))
				bad = -EINVAL;
			break;
		case OPT_MARSHALLER:
			if (strcmp(optarg, "zerocopy") == 0)
				c->zerocopy = true;
			else if (strcmp(optarg, "copy") == 0)
				c->zerocopy = false;
			else
				bad = -EINVAL;
			break;
		case OPT_DATA_IO:
			if (strcmp(optarg, "buffered") == 0)
				c->data_direct = false;
			else if (strcmp(optarg, "direct") == 0)
				c->data_direct = true;
			else
				bad = -EINVAL;
			break;
		case OPT_DISCARD:
			c->discard = true;
			break;
		case OPT_METRICS:
			c->metrics = optarg;
			break;
		case OPT_QUORUM:
			bad = parse_uint(optarg, &c->write_quorum);
			break;
		case OPT_SPG:
			bad = parse_uint(optarg, &c->stripes_per_group);
			if (!bad && c->stripes_per_group == 0)
				bad = -EINVAL;
			break;
		case OPT_INFLIGHT:
			bad = zc_parse_size(optarg, &c->inflight_cap);
			break;
		case OPT_L1:
			bad = zc_parse_duration_ns(optarg, &c->adm_l1_ns);
			break;
		case OPT_L2:
			bad = zc_parse_duration_ns(optarg, &c->adm_l2_ns);
			break;
		case OPT_L3:
			bad = zc_parse_duration_ns(optarg, &c->adm_l3_ns);
			break;
		case OPT_HEAL_DRIVE: {
			unsigned d;

			bad = parse_uint(optarg, &d);
			if (!bad && d >= DN_MAX_DRIVES)
				bad = -EINVAL;
			if (!bad)
				c->heal_drive = (int)d;
			break;
		}
		case OPT_WORKERS:
			bad = parse_uint(optarg, &c->write_workers);
			if (!bad && (c->write_workers == 0 || c->write_workers > 256))
				bad = -EINVAL;
			break;
		case OPT_READERS:
			bad = parse_uint(optarg, &c->readers);
			if (!bad && (c->readers == 0 || c->readers > 256))
				bad = -EINVAL;
			break;
		case OPT_CALL_CAP:
			bad = zc_parse_size(optarg, &c->call_cap);
			if (!bad && (c->call_cap < (64u << 10) || c->call_cap > (1u << 30)))
				bad = -EINVAL;
			break;
		case OPT_HEAL_INTERVAL:
			bad = zc_parse_duration_ns(optarg, &c->heal_interval_ns);
			if (!bad && c->heal_interval_ns > 86400000000000ull)
				bad = -EINVAL;
			break;
		case OPT_GRACE:
			bad = zc_parse_duration_ns(optarg, &c->grace_ns);
			if (!bad && c->grace_ns > 600000000000ull)
				bad = -EINVAL;
			break;
		case OPT_TLS_CA:
			c->tls.ca_file = optarg;
			break;
		case OPT_TLS_CERT:
			c->tls.cert_file = optarg;
			break;
		case OPT_TLS_KEY:
			c->tls.key_file = optarg;
			break;
		case OPT_INSECURE:
			c->tls.insecure = true;
			break;
		case OPT_CLUSTER:
			c->cluster = optarg;
			break;
		case OPT_NODE:
			c->node = optarg; /* its rule is checked by dn_cluster_start */
			break;
		case OPT_ZONE:
			c->zone = optarg; /* the node name's rule, checked by dn_cluster_start */
			break;
		case OPT_RESERVE:
			bad = zc_parse_size(optarg, &c->reserve);
			break;
		case OPT_UNIX_SOCKET:
			c->unix_socket = optarg;
			break;
		case OPT_ADVERTISE:
			c->advertise = optarg;
			break;
		case OPT_GC_GRACE:
			bad = zc_parse_duration_ns(optarg, &c->gc_grace_ns);
			if (!bad && (c->gc_grace_ns < 1000000000ull ||
			             c->gc_grace_ns > 7 * 86400000000000ull))
				bad = -EINVAL;
			break;
		case OPT_READ_GRACE:
			bad = zc_parse_duration_ns(optarg, &c->read_grace_ns);
			if (!bad && (c->read_grace_ns < 1000000000ull ||
			             c->read_grace_ns > 7 * 86400000000000ull))
				bad = -EINVAL;
			break;
		case OPT_HEAL_AFTER:
			bad = zc_parse_duration_ns(optarg, &c->heal_after_ns);
			if (!bad && (c->heal_after_ns < 1000000000ull ||
			             c->heal_after_ns > 30 * 86400000000000ull))
				bad = -EINVAL;
			break;
		case OPT_SCRUB_RATE:
			bad = parse_rate(optarg, &c->scrub_rate);
			if (!bad && c->scrub_rate &&
			    (c->scrub_rate < 4096 || c->scrub_rate > (64ull << 30)))
				bad = -EINVAL;
			break;
		case OPT_SCRUB_INTERVAL:
			bad = parse_days(optarg, &c->scrub_every_ns);
			if (!bad && c->scrub_every_ns &&
			    (c->scrub_every_ns < 1000000000ull ||
			     c->scrub_every_ns > 30 * 86400000000000ull))
				bad = -EINVAL;
			break;
		case OPT_HELP:
			usage(out);
			return 1;
		case OPT_VERSION:
			fprintf(out, "zest-datanode %s\n", ZEST_VERSION);
			return 1;
		default:
			fprintf(err, "zest-datanode: unknown flag or missing value: %s\n",
			        argv[optind - 1]);
			return -EINVAL;
		}
		if (bad) {
			const char *at = zc_conf_where(&conf, optind - 1 + c->heal);

			fprintf(err, "zest-datanode: %sbad value for %s%s: %s\n", at,
			        *at ? "" : "--", long_opts[opt - OPT_LISTEN].name, optarg);
			usage_of(long_opts[opt - OPT_LISTEN].name, err);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(err, "zest-datanode: unexpected argument: %s\n", argv[optind]);
		return -EINVAL;
	}
	if (c->cluster && c->ndrives < 1) {
		fprintf(err, "zest-datanode: need at least one --drive folder\n");
		return -EINVAL;
	}
	if (!c->cluster && c->ndrives < c->k + c->m) {
		fprintf(err, "zest-datanode: need at least %u --drive folders for %u+%u, got %u\n",
		        c->k + c->m, c->k, c->m, c->ndrives);
		return -EINVAL;
	}
	if (c->heal_drive >= 0 && (!c->heal || (unsigned)c->heal_drive >= c->ndrives)) {
		fprintf(err,
		        "zest-datanode: --heal-drive needs `heal` and a drive index below %u\n",
		        c->ndrives);
		return -EINVAL;
	}
	if (c->write_quorum && (c->write_quorum < c->k || c->write_quorum > c->k + c->m)) {
		fprintf(err, "zest-datanode: --write-quorum must be within [%u, %u]\n", c->k,
		        c->k + c->m);
		return -EINVAL;
	}
	if (check_tls(c, err) || check_etcd_tls(c, err))
		return -EINVAL;
	if (!c->cluster != !c->node || ((c->advertise || c->zone) && !c->cluster)) {
		fprintf(err, "zest-datanode: --cluster and --node go together (--advertise "
		             "and --zone with them)\n");
		return -EINVAL;
	}
	if (!(c->adm_l1_ns <= c->adm_l2_ns && c->adm_l2_ns <= c->adm_l3_ns)) {
		fprintf(err, "zest-datanode: admission limits need L1 <= L2 <= L3\n");
		return -EINVAL;
	}
	return 0;
}

void
dn_config_to_opts(const struct dn_config *c, struct dn_store_opts *o)
{
	dn_store_opts_default(o);
	o->drives = c->drives;
	o->ndrives = c->ndrives;
	o->cells_only = c->cluster != NULL; /* a node's cells go to the cell store */
	o->cell_reserve = c->cluster ? c->reserve : 0;
	o->k = c->k;
	o->m = c->m;
	o->cell_size = c->cell_size;
	o->stripes_per_group = c->stripes_per_group;
	o->write_quorum = c->write_quorum;
	o->inflight_cap = c->inflight_cap;
	o->discard = c->discard;
	o->data_direct = c->data_direct;
	o->adm_l1_ns = c->adm_l1_ns;
	o->adm_l2_ns = c->adm_l2_ns;
	o->adm_l3_ns = c->adm_l3_ns;
	o->heal_interval_ns = c->heal ? 0 : c->heal_interval_ns; /* `heal` does it all itself */
	/* Always, cluster mode or not: the sweep at open must keep the cells' files, the
	 * scrubber check them, whatever mode this node last ran in. */
	o->side = &dn_cells_side;
}
