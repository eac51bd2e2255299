/* zest-prof's command line (prof_opts.h). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prof_opts.h"
#include "zc.h"

void
prof_opts_usage(FILE *out)
{
	fprintf(out,
	        "usage: zest-prof [options]\n"
	        "  --modes LIST       datanode modes to compare, a comma list of copy,\n"
	        "                     zerocopy, discard (= zerocopy with --discard), direct\n"
	        "                     (= zerocopy with --data-io direct) and copy-direct;\n"
	        "                     ratios are against the FIRST mode (default copy,zerocopy)\n"
	        "  --data-io LIST     also cross the modes with data-cell writes, a comma list\n"
	        "                     of buffered,direct (zest-datanode --data-io): e.g.\n"
	        "                     --modes zerocopy --data-io buffered,direct runs\n"
	        "                     zerocopy and direct (default: buffered only)\n"
	        "  --pairs N          rounds of the modes, alternating (default 3, min 3)\n"
	        "  --drives DIR       folder for the drive folders (default: a fresh tmpfs dir\n"
	        "                     under /dev/shm, removed at the end)\n"
	        "  --ec K+M           datanode scheme (default 4+2)\n"
	        "  --obj.size SIZE    object size (default 4MiB)\n"
	        "  --concurrent N     parallel streams (default 4)\n"
	        "  --duration D       measured load per run (default 8s)\n"
	        "  --warmup D         uncounted load before it (default 1s)\n"
	        "  --s3               the datanode AND zest-s3gw in front of it (gRPC over\n"
	        "                     mutual TLS, a throwaway CA as `make run` makes), driven\n"
	        "                     through S3 by zest-bench's load engine: per mode a PUT\n"
	        "                     phase and a GET phase, each with MiB/s, obj/s, latency\n"
	        "                     p50/p99/p99.9, CPU-s per GiB of each process and by\n"
	        "                     thread, user-space copies by stage, page-cache bytes and\n"
	        "                     peak RSS; --modes copy,zerocopy and --data-io as above\n"
	        "                     (with --perf/--callgrind: PUTs only, via zest-bench)\n"
	        "  --plaintext        --s3: gRPC between the gateway and the datanode without\n"
	        "                     TLS (--insecure), to measure what mTLS costs\n"
	        "  --unix             --s3: the gateway reaches the datanode over the datanode's\n"
	        "                     --unix-socket (the local link: no TLS, the kernel checks\n"
	        "                     the user); default: mutual TLS over TCP\n"
	        "  --ops LIST         --s3: the phases, put,get (default) or one of them\n"
	        "  --objects N        --s3: objects the GETs read (default: 2 per stream, at\n"
	        "                     most 256 MiB of them, at least 4)\n"
	        "  --store-baseline   also time, once per round, the kernel storing 1 MiB\n"
	        "                     write()s in k+m files in the drives' filesystem, and\n"
	        "                     with discard in --modes the full path's CPU floor:\n"
	        "                     discard + (k+m)/k x store (default off)\n"
	        "  --json             {\"copy\":{...},\"zerocopy\":{...},\"ratio\":{...}}; with\n"
	        "                     other modes one object per mode and \"ratio_MODE\" per\n"
	        "                     mode after the first\n"
	        "  --svg FILE         write a bar chart (not with --s3)\n"
	        "  --callgrind        also run each mode once under valgrind's callgrind and\n"
	        "                     report instructions per payload byte of the measured\n"
	        "                     run (dumps kept in the work folder)\n"
	        "  --perf             also record each mode once with perf (cpu-clock, 999 Hz; "
	        "the\n"
	        "                     datanode, and the gateway with --s3) and draw a flame\n"
	        "                     graph of each: PREFIX-MODE.svg (PREFIX-copy.svg,\n"
	        "                     PREFIX-zerocopy.svg), with the folded stacks beside them\n"
	        "                     (PREFIX-MODE.folded); where perf works\n"
	        "  --flame PREFIX     where --perf writes (default: WORK/flame); implies --perf\n"
	        "  --perf-call-graph M  perf's unwinder: dwarf (default; whole stacks without\n"
	        "                     frame pointers) or fp\n"
	        "  --tls-dir DIR      run the internal gRPC over mutual TLS with the certificates\n"
	        "                     of `tools/zest-certs.sh DIR` (ca.pem, datanode.pem/.key\n"
	        "                     for the datanode, gateway.pem/.key for zest-bench and the\n"
	        "                     gateway); default: plaintext (--insecure), the baseline;\n"
	        "                     with --s3 a throwaway CA in the work folder\n"
	        "  --keep             keep the work folder (logs, drives, profiles)\n");
}

int
prof_opts_parse(int argc, char **argv, struct prof_opts *o)
{
	static const struct option lo[] = {
		{ "pairs", required_argument, NULL, 'p' },
		{ "modes", required_argument, NULL, 'M' },
		{ "data-io", required_argument, NULL, 'I' },
		{ "store-baseline", no_argument, NULL, 'B' },
		{ "drives", required_argument, NULL, 'd' },
		{ "ec", required_argument, NULL, 'e' },
		{ "obj.size", required_argument, NULL, 'z' },
		{ "concurrent", required_argument, NULL, 'c' },
		{ "duration", required_argument, NULL, 'D' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "s3", no_argument, NULL, 's' },
		{ "objects", required_argument, NULL, 'O' },
		{ "ops", required_argument, NULL, 'o' },
		{ "plaintext", no_argument, NULL, 'N' },
		{ "unix", no_argument, NULL, 'U' },
		{ "json", no_argument, NULL, 'j' },
		{ "svg", required_argument, NULL, 'S' },
		{ "callgrind", no_argument, NULL, 'C' },
		{ "perf", no_argument, NULL, 'P' },
		{ "flame", required_argument, NULL, 'F' },
		{ "perf-call-graph", required_argument, NULL, 'G' },
		{ "keep", no_argument, NULL, 'k' },
		{ "tls-dir", required_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *data_io = NULL;
	char err[160];
	uint64_t tmp;
	int opt, n;

	*o = (struct prof_opts){ .ec = "4+2",
		                 .obj_size = "4MiB",
		                 .duration = "8s",
		                 .warmup = "1s",
		                 .pairs = 3,
		                 .concurrent = 4,
		                 .call_graph = "dwarf",
		                 .n_modes = 2,
		                 .ops = { true, true },
		                 .modes = { PROF_MODE_COPY, PROF_MODE_ZEROCOPY } };

	while ((opt = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (opt) {
		case 'p':
			o->pairs = (unsigned)atoi(optarg);
			if (o->pairs < 3 || o->pairs > PROF_MAX_PAIRS) {
				fprintf(stderr, "zest-prof: --pairs must be 3..%d\n",
				        PROF_MAX_PAIRS);
				return -EINVAL;
			}
			break;
		case 'M':
			n = prof_modes_parse(optarg, o->modes, err, sizeof(err));
			if (n < 0) {
				fprintf(stderr, "zest-prof: %s\n", err);
				return -EINVAL;
			}
			o->n_modes = (unsigned)n;
			break;
		case 'I':
			data_io = optarg; /* crossed with --modes once both are known */
			break;
		case 'B':
			o->store_baseline = true;
			break;
		case 'd':
			o->drives_base = optarg;
			break;
		case 'e':
			o->ec = optarg;
			break;
		case 'z':
			if (zc_parse_size(optarg, &tmp) < 0)
				goto bad;
			o->obj_size = optarg;
			break;
		case 'c':
			o->concurrent = (unsigned)atoi(optarg);
			if (o->concurrent < 1)
				goto bad;
			break;
		case 'D':
			if (zc_parse_duration_ns(optarg, &tmp) < 0)
				goto bad;
			o->duration = optarg;
			break;
		case 'w':
			if (zc_parse_duration_ns(optarg, &tmp) < 0)
				goto bad;
			o->warmup = optarg;
			break;
		case 's':
			o->s3 = true;
			break;
		case 'N':
			o->plaintext = true;
			break;
		case 'U':
			o->unix_link = true;
			break;
		case 'o':
			if (!strcmp(optarg, "put") || !strcmp(optarg, "get") ||
			    !strcmp(optarg, "put,get") || !strcmp(optarg, "get,put")) {
				o->ops[0] = strstr(optarg, "put") != NULL;
				o->ops[1] = strstr(optarg, "get") != NULL;
				break;
			}
			goto bad;
		case 'O':
			o->objects = (unsigned)atoi(optarg);
			if (o->objects < 1)
				goto bad;
			break;
		case 'j':
			o->json = true;
			break;
		case 'S':
			o->svg = optarg;
			break;
		case 'C':
			o->callgrind = true;
			break;
		case 'P':
			o->perf = true;
			break;
		case 'F':
			o->flame = optarg;
			o->perf = true;
			break;
		case 'G':
			if (strcmp(optarg, "dwarf") && strcmp(optarg, "fp"))
				goto bad;
			o->call_graph = optarg;
			break;
		case 'k':
			o->keep = true;
			break;
		case 'T':
			o->tls_dir = optarg;
			break;
		case 'h':
			prof_opts_usage(stdout);
			exit(0);
		case 'V':
			printf("zest-prof %s\n", ZEST_VERSION);
			exit(0);
		default:
			prof_opts_usage(stderr);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "zest-prof: unexpected argument '%s'\n", argv[optind]);
		return -EINVAL;
	}
	if (data_io) {
		n = prof_modes_cross_data_io(o->modes, (int)o->n_modes, data_io, err, sizeof(err));
		if (n < 0) {
			fprintf(stderr, "zest-prof: %s\n", err);
			return -EINVAL;
		}
		o->n_modes = (unsigned)n;
	}
	for (unsigned i = 0; o->s3 && !o->perf && !o->callgrind && i < o->n_modes; i++)
		if (prof_mode_discards(o->modes[i])) {
			fprintf(stderr, "zest-prof: --s3 cannot run discard (its GETs read the "
			                "objects back)\n");
			return -EINVAL;
		}
	if ((o->plaintext || o->unix_link) && (!o->s3 || (o->plaintext && o->unix_link))) {
		fprintf(stderr,
		        "zest-prof: --plaintext and --unix are --s3's links, one of them\n");
		return -EINVAL;
	}
	if (sscanf(o->ec, "%u+%u%n", &o->k, &o->m, &n) != 2 || o->ec[n] || o->k < 1 ||
	    o->k + o->m > PROF_MAX_DRIVES) {
		fprintf(stderr, "zest-prof: bad --ec '%s' (want K+M, K+M <= %d)\n", o->ec,
		        PROF_MAX_DRIVES);
		return -EINVAL;
	}
	/* checked as they came; the defaults parse too */
	zc_parse_size(o->obj_size, &o->obj_size_bytes);
	zc_parse_duration_ns(o->duration, &o->duration_ns);
	zc_parse_duration_ns(o->warmup, &o->warmup_ns);
	return 0;
bad:
	fprintf(stderr, "zest-prof: bad value '%s'\n", optarg);
	return -EINVAL;
}
