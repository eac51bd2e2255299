/*
 * zest-prof's command line: the flags, their defaults and checks, and --help (prof_main.c
 * runs what they ask for). One struct prof_opts per run, filled once by prof_opts_parse and
 * then read by the gRPC rounds (prof_grpc.h), --s3 (prof_s3.h) and the summary.
 *
 * Threading: the main thread, before anything runs.
 */
#ifndef ZEST_PROF_OPTS_H
#define ZEST_PROF_OPTS_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "prof_modes.h"

#define PROF_MAX_PAIRS  32 /* --pairs at most */
#define PROF_MAX_DRIVES 32 /* k + m at most */

struct prof_opts {
	const char *drives_base, *svg, *ec, *obj_size, *duration, *warmup;
	const char *flame, *call_graph;
	const char *tls_dir; /* --tls-dir: a tools/zest-certs.sh folder; NULL: plaintext */
	unsigned pairs, concurrent, n_modes, k, m, objects;
	/* obj_size, duration and warmup parsed */
	uint64_t obj_size_bytes, duration_ns, warmup_ns;
	bool ops[2];    /* --s3 --ops: put, get */
	bool plaintext; /* --s3 --plaintext */
	bool unix_link; /* --s3 --unix */
	enum prof_mode modes[PROF_MAX_MODES];
	bool s3, json, callgrind, perf, keep, store_baseline;
	/* set by main: the build's tools/ folder, the work folder, the daemons' and tools' log */
	char bindir[PATH_MAX], work[PATH_MAX], log[PATH_MAX + 32];
};

/* --help's text. */
void prof_opts_usage(FILE *out);

/*
 * The defaults, then argv's flags into o, checked (--ec into k and m, --data-io crossed with
 * --modes). Returns 0, or -EINVAL after saying why on stderr; exits 0 after --help or
 * --version.
 */
int prof_opts_parse(int argc, char **argv, struct prof_opts *o);

#endif
