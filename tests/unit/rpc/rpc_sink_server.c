/*
 * rpc_sink_server: a zest.Datanode stand-in for benchmarks until the datanode exists.
 * --discard (default): receive and parse each WriteChunk (CRC checked), release it,
 * answer on commit: the transport's own ceiling. --hold: keep each segment's ref until
 * a drive thread drops it, as the datanode will. Prints "listening on HOST:PORT", runs
 * until SIGINT/SIGTERM, then prints the payload counters.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/grpc.h>

#include "rpc_test_sink.h"
#include "rpc_stats.h"
#include "zc.h"

static void
usage(FILE *out)
{
	fprintf(out, "usage: rpc_sink_server [options]\n"
	             "  --listen ADDR          address to bind (default 127.0.0.1:0)\n"
	             "  --marshaller M         zerocopy|copy (default zerocopy)\n"
	             "  --threads N            completion-queue threads (default 2)\n"
	             "  --max-message SIZE     data bytes per message (default 16MiB)\n"
	             "  --discard              receive, parse, release (default)\n"
	             "  --hold                 keep refs until a drive thread drops them\n"
	             "  --no-malloc-tune       keep glibc's malloc defaults (see rpc_tune_malloc)\n"
	             "  --help, --version\n");
}

int
main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "marshaller", required_argument, NULL, 'm' },
		{ "threads", required_argument, NULL, 't' },
		{ "max-message", required_argument, NULL, 'x' },
		{ "discard", no_argument, NULL, 'd' },
		{ "hold", no_argument, NULL, 'H' },
		{ "no-malloc-tune", no_argument, NULL, 'M' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	struct rpc_server_opts so = { .listen = "127.0.0.1:0",
		                      .cq_threads = 2,
		                      .tls.insecure = true };
	struct rpc_server_handlers h;
	struct rpc_server *srv;
	struct rpc_stats st;
	struct sink sink;
	bool discard = true, tune = true;
	uint64_t v;
	sigset_t set;
	int c, sig;

	zc_log_init();
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'l':
			so.listen = optarg;
			break;
		case 'm':
			if (rpc_marshaller_parse(optarg, &so.marshaller)) {
				fprintf(stderr, "rpc_sink_server: bad --marshaller '%s'\n", optarg);
				return 2;
			}
			break;
		case 't':
			so.cq_threads = (unsigned)atoi(optarg);
			break;
		case 'x':
			if (zc_parse_size(optarg, &v)) {
				fprintf(stderr, "rpc_sink_server: bad --max-message '%s'\n",
				        optarg);
				return 2;
			}
			so.max_message = v;
			break;
		case 'd':
			discard = true;
			break;
		case 'H':
			discard = false;
			break;
		case 'M':
			tune = false;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("rpc_sink_server %s\n", ZEST_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (tune && rpc_tune_malloc())
		fprintf(stderr, "rpc_sink_server: mallopt failed\n");
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	sink_init(&sink, false, discard);
	sink_handlers(&sink, &h);
	if (rpc_server_create(&so, &h, &srv)) {
		fprintf(stderr, "rpc_sink_server: cannot listen on %s\n", so.listen);
		return 1;
	}
	printf("listening on %.*s:%d\n", (int)strcspn(so.listen, ":"), so.listen,
	       rpc_server_port(srv));
	fflush(stdout);
	sigwait(&set, &sig);
	rpc_server_destroy(srv, 1000);
	sink_fini(&sink);
	rpc_stats_get(&st);
	printf("received_bytes=%llu messages=%llu", (unsigned long long)st.received_bytes,
	       (unsigned long long)st.messages);
	for (int s = 0; s < RPC_STAGE_COUNT; s++)
		printf(" copied_%s=%llu", rpc_stage_name(s),
		       (unsigned long long)st.copied_bytes[s]);
	printf(" objects=%ld aborted=%ld\n", atomic_load(&sink.committed),
	       atomic_load(&sink.aborted));
	return 0;
}
