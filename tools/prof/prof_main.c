/*
 * zest-prof: datanode modes side by side, on the same machine in the same run.
 *
 * The modes (--modes, default copy,zerocopy; see prof_modes.h) alternate: in each of --pairs
 * rounds it starts a fresh datanode in each mode in turn, drives load at it, and stops it
 * (optionally with the S3 gateway in front). Per run it measures throughput and latency
 * (from zest-bench), the datanode's CPU seconds per GiB received (/proc/PID/stat against
 * zest_payload_received_bytes_total) and the same by thread (/proc/PID/task/<tid>/stat),
 * payload bytes copied in user space per payload byte (/metrics), and peak RSS (VmHWM).
 * Ratios are against the first mode listed: the median of the per-round ratios, so slow
 * drifts of a noisy machine cancel out. --store-baseline adds, once per round, what the
 * kernel charges to store bytes in the drives' filesystem (prof_store.h).
 */
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "prof_grpc.h"
#include "prof_opts.h"
#include "prof_report.h"
#include "prof_s3.h"
#include "prof_summary.h"
#include "zc.h"

/* --s3 without a profiler: the PUT and GET phases of prof_s3.h. */
static int
s3_main(struct prof_opts *o)
{
	int rc;

	if (o->svg)
		fprintf(stderr,
		        "zest-prof: --svg draws no chart with --s3 (--json has the figures)\n");
	rc = prof_s3_main(o);
	if (rc < 0)
		o->keep = true;
	return rc;
}

int
main(int argc, char **argv)
{
	static struct prof_opts o;
	static struct prof_run runs[PROF_MAX_MODES][PROF_MAX_PAIRS], extra[PROF_MAX_MODES];
	static struct prof_store_result store[PROF_MAX_PAIRS];
	static struct prof_summary sum;
	char flame_prefix[PATH_MAX + 8];
	char exe[PATH_MAX], *slash;
	bool legacy;
	ssize_t len;
	int rc = 0;

	zc_log_init();
	if (prof_opts_parse(argc, argv, &o) < 0)
		return 2;
	if (!o.s3 || o.perf || o.callgrind) /* prof_s3.c says its own */
		fprintf(stderr, "zest-prof: internal gRPC %s%s\n",
		        o.tls_dir ? "over mutual TLS, certificates in "
		                  : "in plaintext (--insecure)",
		        o.tls_dir ? o.tls_dir : "");
	legacy = o.n_modes == 2 && o.modes[0] == PROF_MODE_COPY && o.modes[1] == PROF_MODE_ZEROCOPY;
	len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (len < 0)
		return 1;
	exe[len] = 0;
	slash = strrchr(exe, '/');
	*slash = 0;
	snprintf(o.bindir, sizeof(o.bindir), "%s", exe);
	snprintf(o.work, sizeof(o.work), "/dev/shm/zest-prof.XXXXXX");
	if (access("/dev/shm", W_OK) < 0)
		snprintf(o.work, sizeof(o.work), "/tmp/zest-prof.XXXXXX");
	if (!mkdtemp(o.work)) {
		perror("zest-prof: mkdtemp");
		return 1;
	}
	if (!o.drives_base)
		o.drives_base = o.work;
	snprintf(o.log, sizeof(o.log), "%s/prof.log", o.work);

	if (o.s3 && !o.perf && !o.callgrind) {
		rc = s3_main(&o);
		goto out;
	}
	for (unsigned p = 0; p < o.pairs && rc == 0; p++) {
		if (!o.json)
			fprintf(stderr, "zest-prof: %s %u/%u\n", legacy ? "pair" : "round", p + 1,
			        o.pairs);
		for (unsigned i = 0; i < o.n_modes && rc == 0; i++)
			rc = prof_grpc_run(&o, o.modes[i], p, PROF_TOOL_NONE, &runs[i][p]);
		if (rc == 0 && o.store_baseline)
			prof_summary_store_round(&o, runs, p, &store[p]);
	}
	if (rc < 0) {
		o.keep = true;
		goto out;
	}
	prof_summarize(&o, runs, store, &sum);
	if (o.callgrind) {
		unsigned i;

		if (!o.json)
			fprintf(stderr, "zest-prof: callgrind runs (slow)\n");
		for (i = 0; i < o.n_modes; i++)
			if (prof_grpc_run(&o, o.modes[i], 100, PROF_TOOL_CALLGRIND, &extra[i]) != 0)
				break;
		for (unsigned j = 0; i == o.n_modes && j < o.n_modes; j++) {
			sum.mode[j].v[PROF_M_IPB] = extra[j].v[PROF_M_IPB];
			sum.mode[j].ratio[PROF_M_IPB] =
			        j ? extra[j].v[PROF_M_IPB] / extra[0].v[PROF_M_IPB] : NAN;
		}
		o.keep = true;
	}
	if (o.perf) {
		if (!o.flame) {
			snprintf(flame_prefix, sizeof(flame_prefix), "%s/flame", o.work);
			o.flame = flame_prefix;
		}
		if (!o.json)
			fprintf(stderr, "zest-prof: perf runs\n");
		for (unsigned i = 0; i < o.n_modes; i++)
			prof_grpc_run(&o, o.modes[i], 200, PROF_TOOL_PERF, &extra[i]);
		for (unsigned i = 0; i < o.n_modes; i++)
			prof_summary_flame(&o, o.modes[i], &sum.mode[i].flame);
		sum.has_flame = true;
		fprintf(stderr, "zest-prof: perf data in %s/perf.MODE.data (perf report -i FILE)\n",
		        o.work);
		o.keep = true;
	}
	if (o.json)
		prof_report_json(stdout, &sum);
	else
		prof_report_table(stdout, &sum);
	if (o.svg && prof_report_svg(o.svg, &sum) < 0)
		fprintf(stderr, "zest-prof: cannot write %s\n", o.svg);
out:
	if (o.keep) {
		fprintf(stderr, "zest-prof: work folder kept: %s\n", o.work);
	} else {
		char cmd[PATH_MAX + 16];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", o.work);
		if (system(cmd) != 0)
			fprintf(stderr, "zest-prof: cannot remove %s\n", o.work);
	}
	return rc < 0 ? 1 : 0;
}
