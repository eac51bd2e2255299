/* s3_cli: the zest-s3gw command line: defaults (and the two environment variables for the
 * keys), then the --config file (common/zc_conf.h), then flags, checked once; then the
 * server runs until SIGINT/SIGTERM. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpc_client.h"
#include "rpc_tls.h"
#include "s3.h"
#include "zc.h"
#include "zc_conf.h"

#define MAX_DATANODES 64

static struct s3_server *running;
/* The merged arguments (file, then argv): the config's strings point into them to exit. */
static struct zc_conf conf;

static void
on_signal(int sig)
{
	(void)sig;
	if (running)
		s3_server_stop(running);
}

static void
usage(FILE *f)
{
	fprintf(f,
	        "usage: zest-s3gw [flags]\n"
	        "S3 gateway of zest: speaks S3 over HTTP/1.1 and streams objects to the "
	        "datanodes.\n\n"
	        "  --config FILE           settings read before the flags: one `name = value` a\n"
	        "                          line, the names of the flags below without --\n"
	        "                          (`insecure = true`); `#` comment lines; a flag\n"
	        "                          given on the command line wins (default: none)\n"
	        "  --listen HOST:PORT      address to serve S3 on (default 127.0.0.1:9000; port 0 "
	        "picks one)\n"
	        "  --datanode HOST:PORT    a datanode; repeat for several (default: none);\n"
	        "                          unix:PATH is a datanode on this host at its\n"
	        "                          --unix-socket (no TLS: the kernel checks the user)\n"
	        "  --cluster E1[,E2...]    cluster mode, instead of --datanode: buckets, records\n"
	        "                          and membership in etcd at these endpoints (https://\n"
	        "                          for TLS with the --cluster-* files; plaintext only\n"
	        "                          with --insecure), objects erasure-\n"
	        "                          coded over the live datanodes (default: off)\n"
	        "  --local-node NAME=unix:PATH  with --cluster: datanode NAME runs on this host\n"
	        "                          with --unix-socket PATH: it coordinates this gateway's\n"
	        "                          PUTs while live, and it is read over the socket\n"
	        "                          (default: none)\n"
	        "  --access-key KEY        access key of SigV4/SigV2 signatures (default: "
	        "$ZEST_ACCESS_KEY)\n"
	        "  --secret-key KEY        its secret key (default: $ZEST_SECRET_KEY)\n"
	        "  --anonymous             serve without keys, nothing authenticated: warned at\n"
	        "                          start, anonymous=1 on each access log line "
	        "(ZEST_LOG=debug)\n"
	        "                          (default: off; with neither keys nor this, the gateway\n"
	        "                          refuses to start)\n"
	        "  --region NAME           region in signatures and GetBucketLocation (default "
	        "us-east-1)\n"
	        "  --domain NAME           base domain for virtual-host addressing (default: path "
	        "style only)\n"
	        "  --tls-cert FILE         PEM certificate chain: serve HTTPS (default: plain "
	        "HTTP)\n"
	        "  --tls-key FILE          PEM private key for --tls-cert\n"
	        "  --cluster-ca FILE       PEM cluster CA: datanodes' certificates must be signed\n"
	        "                          by it (mutual TLS to the datanodes; with --cluster\n"
	        "                          https:// endpoints, etcd's too)\n"
	        "  --cluster-cert FILE     PEM client certificate the gateway shows datanodes\n"
	        "  --cluster-key FILE      PEM private key of --cluster-cert\n"
	        "  --insecure              plaintext gRPC to the datanodes (and plaintext etcd\n"
	        "                          with --cluster), warned at start\n"
	        "                          (the three --cluster-* flags or --insecure are "
	        "required)\n"
	        "  --metrics HOST:PORT     serve Prometheus /metrics there (default: off)\n"
	        "  --threads N             event-loop threads (default 2)\n"
	        "  --workers N             threads serving requests; each may block (default 16)\n"
	        "  --max-header SIZE       request head limit (default 16KiB)\n"
	        "  --header-timeout DUR    time allowed to send a request head (default 10s)\n"
	        "  --idle-timeout DUR      idle connection and stalled body timeout (default 60s)\n"
	        "  --stream-timeout DUR    a datanode stream that makes no progress this long is\n"
	        "                          cancelled: its PUT gets 503 SlowDown, a cluster GET\n"
	        "                          reads around the node (ReadCell: at most 5s); keep it\n"
	        "                          above the coordinators' peer timeout (default 15s)\n"
	        "  --max-object SIZE       largest single PUT (default 5TiB)\n"
	        "  --max-conns N           open connections before new ones are refused (default "
	        "4096)\n"
	        "  --md5 MODE              ETag MD5: serial (each upload on its worker), multi\n"
	        "                          (concurrent uploads in AVX2 lanes, one hasher thread),\n"
	        "                          auto (multi where the CPU has AVX2; default)\n"
	        "  --help                  this text\n"
	        "  --version               print the version\n");
}

/* --local-node NAME=unix:PATH: NAME as a datanode's --node ([A-Za-z0-9._-], 1-128). */
static bool
local_node_ok(const char *spec)
{
	const char *eq = strchr(spec, '=');
	size_t len = eq ? (size_t)(eq - spec) : 0;

	return len >= 1 && len <= 128 &&
	       strspn(spec, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") ==
	               len &&
	       rpc_unix_is_target(eq + 1) && eq[1 + strlen("unix:")] != '\0';
}

/* Every etcd endpoint of --cluster says https:// (etcd over TLS). */
static bool
endpoints_all_https(const char *list)
{
	for (const char *p = list;; p++) {
		if (strncmp(p, "https://", 8))
			return false;
		p = strchr(p, ',');
		if (!p)
			return true;
	}
}

static void
destroy_own(struct s3_backend *own, const char *cluster)
{
	if (cluster)
		s3_backend_cluster_destroy(own);
	else
		s3_backend_rpc_destroy(own);
}

int
s3_main(int argc, char **argv, const struct s3_backend *be)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "datanode", required_argument, NULL, 'd' },
		{ "cluster", required_argument, NULL, 'X' },
		{ "local-node", required_argument, NULL, 'L' },
		{ "access-key", required_argument, NULL, 'a' },
		{ "secret-key", required_argument, NULL, 's' },
		{ "region", required_argument, NULL, 'r' },
		{ "domain", required_argument, NULL, 'D' },
		{ "tls-cert", required_argument, NULL, 'c' },
		{ "tls-key", required_argument, NULL, 'k' },
		{ "metrics", required_argument, NULL, 'm' },
		{ "threads", required_argument, NULL, 't' },
		{ "max-header", required_argument, NULL, 'H' },
		{ "header-timeout", required_argument, NULL, 'T' },
		{ "idle-timeout", required_argument, NULL, 'I' },
		{ "stream-timeout", required_argument, NULL, 'S' },
		{ "max-object", required_argument, NULL, 'O' },
		{ "md5", required_argument, NULL, '5' },
		{ "max-conns", required_argument, NULL, 'C' },
		{ "workers", required_argument, NULL, 'W' },
		{ "anonymous", no_argument, NULL, 'N' },
		{ "cluster-ca", required_argument, NULL, 'A' },
		{ "cluster-cert", required_argument, NULL, 'E' },
		{ "cluster-key", required_argument, NULL, 'K' },
		{ "insecure", no_argument, NULL, 'i' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct s3_config cfg = { 0 };
	struct rpc_tls tls = { 0 };
	char tls_err[RPC_TLS_ERR_MAX];
	const char *datanodes[MAX_DATANODES];
	const char *cluster = NULL, *local_node = NULL;
	unsigned ndn = 0, stream_ms = 0;
	struct s3_server *srv;
	struct s3_backend *own = NULL;
	struct sigaction sa;
	int c, rc;
	uint64_t v;
	bool anonymous = false;

	zc_log_init();
	cfg.listen = "127.0.0.1:9000";
	cfg.region = "us-east-1";
	cfg.access_key = getenv("ZEST_ACCESS_KEY");
	cfg.secret_key = getenv("ZEST_SECRET_KEY");
	zc_conf_fini(&conf);
	if (zc_conf_load(&conf, argc, argv, 1, opts, "zest-s3gw", stderr))
		return 2;
	argc = conf.argc;
	argv = conf.argv;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		/* "FILE:LINE: " when the flag came from the config file */
		const char *at = zc_conf_where(&conf, optind - 1);

		switch (c) {
		case 'l':
			cfg.listen = optarg;
			break;
		case 'd':
			if (ndn == MAX_DATANODES) {
				fprintf(stderr, "zest-s3gw: %sat most %d --datanode\n", at,
				        MAX_DATANODES);
				return 2;
			}
			datanodes[ndn++] = optarg;
			break;
		case 'X':
			cluster = optarg;
			break;
		case 'L':
			local_node = optarg;
			break;
		case 'a':
			cfg.access_key = optarg;
			break;
		case 's':
			cfg.secret_key = optarg;
			break;
		case 'r':
			cfg.region = optarg;
			break;
		case 'D':
			cfg.domain = optarg;
			break;
		case 'c':
			cfg.tls_cert = optarg;
			break;
		case 'k':
			cfg.tls_key = optarg;
			break;
		case 'm':
			cfg.metrics = optarg;
			break;
		case 't':
			cfg.threads = (unsigned)atoi(optarg);
			if (cfg.threads < 1 || cfg.threads > 16) {
				fprintf(stderr, "zest-s3gw: %s--threads must be 1..16\n", at);
				return 2;
			}
			break;
		case 'H':
			if (zc_parse_size(optarg, &v) < 0 || v < 1024 || v > (128u << 10)) {
				fprintf(stderr, "zest-s3gw: %s--max-header must be 1KiB..128KiB\n",
				        at);
				return 2;
			}
			cfg.max_header = v;
			break;
		case 'T':
		case 'I':
		case 'S':
			if (zc_parse_duration_ns(optarg, &v) < 0 || v < 1000000) {
				fprintf(stderr,
				        "zest-s3gw: %sbad duration for --%s: '%s' (1ms or more: "
				        "500ms, 10s, 2m, 1h)\n",
				        at,
				        c == 'T'   ? "header-timeout"
				        : c == 'I' ? "idle-timeout"
				                   : "stream-timeout",
				        optarg);
				return 2;
			}
			if (c == 'T')
				cfg.header_timeout_ms = (unsigned)(v / 1000000);
			else if (c == 'I')
				cfg.idle_timeout_ms = (unsigned)(v / 1000000);
			else
				stream_ms = (unsigned)(v / 1000000);
			break;
		case 'O':
			if (zc_parse_size(optarg, &v) < 0 || v == 0) {
				fprintf(stderr,
				        "zest-s3gw: %sbad --max-object: '%s' (a size: 5TiB)\n", at,
				        optarg);
				return 2;
			}
			cfg.max_object = v;
			break;
		case 'W':
			cfg.workers = (unsigned)atoi(optarg);
			if (cfg.workers < 1 || cfg.workers > 256) {
				fprintf(stderr, "zest-s3gw: %s--workers must be 1..256\n", at);
				return 2;
			}
			break;
		case 'C':
			cfg.max_conns = (unsigned)atoi(optarg);
			if (cfg.max_conns < 1 || cfg.max_conns > 1000000) {
				fprintf(stderr, "zest-s3gw: %s--max-conns must be 1..1000000\n",
				        at);
				return 2;
			}
			break;
		case 'N':
			anonymous = true;
			break;
		case 'A':
			tls.ca_file = optarg;
			break;
		case 'E':
			tls.cert_file = optarg;
			break;
		case 'K':
			tls.key_file = optarg;
			break;
		case 'i':
			tls.insecure = true;
			break;
		case '5':
			if (strcmp(optarg, "serial") == 0) {
				cfg.md5 = S3_MD5_SERIAL;
			} else if (strcmp(optarg, "multi") == 0) {
				cfg.md5 = S3_MD5_MULTI;
			} else if (strcmp(optarg, "auto") == 0) {
				cfg.md5 = S3_MD5_AUTO;
			} else {
				fprintf(stderr,
				        "zest-s3gw: %s--md5 must be serial, multi or auto\n", at);
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("zest-s3gw %s\n", ZEST_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "zest-s3gw: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if ((cfg.access_key == NULL) != (cfg.secret_key == NULL)) {
		fprintf(stderr, "zest-s3gw: --access-key and --secret-key go together\n");
		return 2;
	}
	/* Open access must be asked for: a gateway that lost its keys (an unset variable in a
	 * service file) must not quietly serve everyone. */
	if (!cfg.access_key && !anonymous) {
		fprintf(stderr, "zest-s3gw: no keys: give --access-key and --secret-key (or "
		                "$ZEST_ACCESS_KEY and $ZEST_SECRET_KEY), or --anonymous to serve "
		                "without authentication\n");
		return 2;
	}
	if (cfg.access_key && anonymous) {
		fprintf(stderr, "zest-s3gw: --anonymous and keys exclude each other\n");
		return 2;
	}
	if ((cfg.tls_cert == NULL) != (cfg.tls_key == NULL)) {
		fprintf(stderr, "zest-s3gw: --tls-cert and --tls-key go together\n");
		return 2;
	}
	if (!be) {
		if (local_node && !cluster) {
			fprintf(stderr, "zest-s3gw: --local-node goes with --cluster (a single "
			                "datanode on this host is --datanode unix:PATH)\n");
			return 2;
		}
		if (local_node && !local_node_ok(local_node)) {
			fprintf(stderr,
			        "zest-s3gw: bad --local-node '%s': want NAME=unix:PATH, the "
			        "node's --node name and its --unix-socket\n",
			        local_node);
			return 2;
		}
		if (cluster && ndn) {
			fprintf(stderr, "zest-s3gw: --cluster and --datanode exclude each other "
			                "(cluster mode finds the datanodes in etcd)\n");
			return 2;
		}
		if (ndn == 0 && !cluster) {
			fprintf(stderr,
			        "zest-s3gw: no --datanode given: the gateway needs at least "
			        "one datanode (HOST:PORT) to store objects, or --cluster "
			        "E1[,E2...] (etcd endpoints)\n");
			return 2;
		}
		/* The datanodes hold every object and the multipart bucket: talking to them in
		 * plaintext must be asked for, like --anonymous. A unix: datanode needs no TLS. */
		unsigned nremote = 0;

		for (unsigned i = 0; i < ndn; i++)
			nremote += !rpc_unix_is_target(datanodes[i]);
		if (cluster || nremote) {
			if (!tls.insecure && !tls.ca_file && !tls.cert_file && !tls.key_file) {
				fprintf(stderr, "zest-s3gw: no datanode security given: pass "
				                "--cluster-ca FILE "
				                "--cluster-cert FILE --cluster-key FILE (mutual "
				                "TLS with the "
				                "cluster CA; tools/zest-certs.sh makes a test CA), "
				                "or --insecure "
				                "for plaintext gRPC to the datanodes\n");
				return 2;
			}
			if (rpc_tls_check(&tls, tls_err, sizeof(tls_err))) {
				fprintf(stderr, "zest-s3gw: datanode TLS: %s\n", tls_err);
				return 2;
			}
			if (tls.insecure)
				ZC_WARN("s3", "datanode_tls=off reason=--insecure: plaintext gRPC "
				              "to the datanodes");
		}
		/* etcd holds every record: plaintext etcd is asked for with --insecure too */
		if (cluster && !tls.insecure && !endpoints_all_https(cluster)) {
			fprintf(stderr,
			        "zest-s3gw: etcd endpoint in --cluster %s is plaintext: anyone "
			        "reaching it can read and rewrite every record; give https:// "
			        "endpoints (etcd with TLS and client certificates, "
			        "docs/operations.md), or --insecure for plaintext etcd and gRPC\n",
			        cluster);
			return 2;
		}
		if (cluster) {
			rc = s3_backend_cluster_create(cluster, &tls, local_node, stream_ms, &own);
			if (rc < 0) {
				fprintf(stderr,
				        "zest-s3gw: cannot start in cluster mode with etcd at %s: "
				        "%s\n",
				        cluster, zc_code_word(zc_err_code(rc)));
				return 1;
			}
			ZC_INFO("s3", "cluster=%s datanode_tls=%s local_node=%s", cluster,
			        tls.insecure ? "off" : "mtls", local_node ? local_node : "none");
		} else {
			rc = s3_backend_rpc_create(datanodes, ndn, &tls, stream_ms, &own);
			if (rc < 0) {
				fprintf(stderr,
				        "zest-s3gw: cannot set up the datanode clients: %s\n",
				        rc == -EEXIST ? "a --datanode is given twice"
				                      : strerror(-rc));
				return 2;
			}
			ZC_INFO("s3", "datanodes=%u first=%s datanode_tls=%s", ndn, datanodes[0],
			        !nremote       ? "local"
			        : tls.insecure ? "off"
			                       : "mtls");
		}
		be = own;
	}
	if (anonymous)
		ZC_WARN("s3", "auth=off anonymous=1 reason=--anonymous: every request is served "
		              "without a signature check");
	rc = s3_server_create(&cfg, be, &srv);
	if (rc < 0) {
		fprintf(stderr, "zest-s3gw: cannot start on %s: %s\n", cfg.listen, strerror(-rc));
		destroy_own(own, cluster);
		return 1;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	running = srv;
	printf("zest-s3gw listening port=%d metrics_port=%d tls=%s\n", s3_server_port(srv),
	       s3_server_metrics_port(srv), cfg.tls_cert ? "on" : "off");
	fflush(stdout);
	rc = s3_server_run(srv);
	running = NULL;
	s3_server_destroy(srv);
	destroy_own(own, cluster);
	rpc_shutdown_wait(5000);
	if (zc_ref_live() != 0)
		ZC_WARN("s3", "zc_refs_live=%ld at_exit", zc_ref_live());
	return rc < 0 ? 1 : 0;
}
