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
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "prof_flame.h"
#include "prof_modes.h"
#include "prof_proc.h"
#include "prof_report.h"
#include "prof_s3.h"
#include "prof_store.h"
#include "prof_threads.h"
#include "zc.h"

#define MAX_PAIRS     32
#define EC_MAX_DRIVES 32
#define GIB           (1024.0 * 1024.0 * 1024.0)
/*
 * The store baseline writes, per round, as many bytes as the datanode's full path stored in
 * that round ((k+m)/k x the payload), and at least this: the kernel then allocates and
 * fills as many fresh pages as the datanode did, rather than a small set it reuses.
 */
#define STORE_MIN_BYTES (1536ull << 20)

struct opts {
	const char *drives_base, *svg, *ec, *obj_size, *duration, *warmup;
	const char *flame, *call_graph;
	const char *tls_dir; /* --tls-dir: a tools/zest-certs.sh folder; NULL: plaintext */
	unsigned pairs, concurrent, n_modes, k, m, objects;
	bool ops[2];    /* --s3 --ops: put, get */
	bool plaintext; /* --s3 --plaintext */
	bool unix_link; /* --s3 --unix */
	enum prof_mode modes[PROF_MAX_MODES];
	bool s3, json, callgrind, perf, keep, store_baseline;
	char bindir[PATH_MAX], work[PATH_MAX];
};

struct run {
	double v[PROF_M_COUNT];
	unsigned n_groups;
	/* CPU-s per payload GiB by thread group, over the measured load */
	struct prof_thread_group groups[PROF_MAX_GROUPS];
};

static char log_path[PATH_MAX + 32];

static void
usage(FILE *out)
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

/* Append the datanode's (server) or a client's security flags to argv at *n. */
static void
tls_args(const struct opts *o, bool server, char **argv, unsigned *n)
{
	static char ca[PATH_MAX + 16], cert[2][PATH_MAX + 16], key[2][PATH_MAX + 16];
	const char *name = server ? "datanode" : "gateway";

	if (!o->tls_dir) {
		argv[(*n)++] = "--insecure";
		return;
	}
	snprintf(ca, sizeof(ca), "%s/ca.pem", o->tls_dir);
	snprintf(cert[server], sizeof(cert[0]), "%s/%s.pem", o->tls_dir, name);
	snprintf(key[server], sizeof(key[0]), "%s/%s.key", o->tls_dir, name);
	argv[(*n)++] = server ? "--tls-ca" : "--cluster-ca";
	argv[(*n)++] = ca;
	argv[(*n)++] = server ? "--tls-cert" : "--cluster-cert";
	argv[(*n)++] = cert[server];
	argv[(*n)++] = server ? "--tls-key" : "--cluster-key";
	argv[(*n)++] = key[server];
}

static void
sibling(const struct opts *o, const char *rel, char *out, size_t n)
{
	snprintf(out, n, "%s/%s", o->bindir, rel);
}

struct payload_counters {
	double received, copied;
};

static int
read_counters(int metrics_port, struct payload_counters *c)
{
	static char text[1 << 20];

	if (prof_http_get(metrics_port, "/metrics", text, sizeof(text)) < 0)
		return -EIO;
	c->received = prof_metric_sum(text, "zest_payload_received_bytes_total");
	c->copied = prof_metric_sum(text, "zest_payload_copied_bytes_total");
	if (isnan(c->copied))
		c->copied = 0;
	return isnan(c->received) ? -EPROTO : 0;
}

/* Instructions ("summary:" or "totals:" line) in a callgrind output file. */
static double
callgrind_total(const char *file)
{
	char line[512];
	double v = NAN;
	FILE *f = fopen(file, "r");

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "summary:", 8) || !strncmp(line, "totals:", 7))
			v = strtod(strchr(line, ':') + 1, NULL);
	if (f)
		fclose(f);
	return v;
}

enum tool { TOOL_NONE, TOOL_CALLGRIND, TOOL_PERF };

/* `callgrind_control -z|-d PID`: zero the counters before the measured run and dump them
 * after it, so that start-up, warm-up and shutdown stay out of instructions per byte. */
static int
callgrind_control(pid_t pid, const char *what, const char *log_path)
{
	char pid_s[32], out[4096];
	char *argv[] = { "/usr/bin/callgrind_control", (char *)what, pid_s, NULL };

	snprintf(pid_s, sizeof(pid_s), "%d", (int)pid);
	return prof_run_capture(argv, out, sizeof(out), log_path);
}

/*
 * One zest-bench load of `duration` at target (grpc, or s3 put through the gateway). keep:
 * no deleting of the objects after an S3 run, so that a profile of the run sees PUTs only.
 */
static int
load(const struct opts *o, char *bench, char *target, char *conc, const char *duration, bool keep,
     char *out, size_t n)
{
	char *grpc_argv[24] = { bench,          "grpc",
		                "--datanode",   target,
		                "--obj.size",   (char *)o->obj_size,
		                "--concurrent", conc,
		                "--duration",   (char *)duration,
		                "--json" };
	unsigned gn = 11;
	char *s3_argv[] = { bench,
		            "s3",
		            "put",
		            "--host",
		            target,
		            "--access-key",
		            "zestprof",
		            "--secret-key",
		            "zestprofsecret",
		            "--obj.size",
		            (char *)o->obj_size,
		            "--concurrent",
		            conc,
		            "--duration",
		            (char *)duration,
		            "--warmup",
		            "0s",
		            "--json",
		            keep ? "--noclear" : NULL,
		            NULL };

	tls_args(o, false, grpc_argv, &gn);
	grpc_argv[gn] = NULL;
	return prof_run_capture(o->s3 ? s3_argv : grpc_argv, out, n, log_path);
}

/* Per-thread CPU of the measured load: each group's CPU-s per payload GiB into r. */
static void
thread_groups(const struct prof_threads *before, const struct prof_threads *after,
              double process_cpu_s, double gib, struct run *r)
{
	r->n_groups =
	        prof_threads_delta(before, after, process_cpu_s, 1.0 / (double)sysconf(_SC_CLK_TCK),
	                           r->groups, PROF_MAX_GROUPS);
	for (unsigned g = 0; g < r->n_groups; g++)
		r->groups[g].cpu_s /= gib;
}

static int
run_once(const struct opts *o, enum prof_mode pm, unsigned idx, enum tool tool, struct run *r)
{
	const char *mode = prof_mode_name(pm);
	struct prof_threads th0 = { 0 }, th1 = { 0 };
	char dn[PATH_MAX + 64], gw[PATH_MAX + 64], bench[PATH_MAX + 64], dir[PATH_MAX + 64];
	char listen[64], metrics[64], gw_listen[64], gw_metrics[64], target[64];
	char cg_out[PATH_MAX + 96], perf_out[PATH_MAX + 96], out[16384], conc[16];
	char *argv[64], *drives[EC_MAX_DRIVES];
	unsigned k = o->k, m = o->m, n = 0;
	int dn_port = prof_free_port(), dn_mport = prof_free_port();
	int gw_port = prof_free_port(), gw_mport = prof_free_port();
	struct payload_counters c0, c1;
	double cpu0, cpu1, ipb = NAN;
	pid_t dn_pid, gw_pid = -1, perf_pid = -1;
	bool th_ok;
	int rc;

	sibling(o, "../datanode/zest-datanode", dn, sizeof(dn));
	sibling(o, "../s3gw/zest-s3gw", gw, sizeof(gw));
	sibling(o, "zest-bench", bench, sizeof(bench));
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", dn_port);
	snprintf(metrics, sizeof(metrics), "127.0.0.1:%d", dn_mport);
	snprintf(gw_listen, sizeof(gw_listen), "127.0.0.1:%d", gw_port);
	snprintf(gw_metrics, sizeof(gw_metrics), "127.0.0.1:%d", gw_mport);
	snprintf(cg_out, sizeof(cg_out), "%s/callgrind.%s.out", o->work, mode);
	snprintf(perf_out, sizeof(perf_out), "%s/perf.%s.data", o->work, mode);

	if (tool == TOOL_CALLGRIND) {
		static char cg_arg[PATH_MAX + 128];

		snprintf(cg_arg, sizeof(cg_arg), "--callgrind-out-file=%s", cg_out);
		argv[n++] = "/usr/bin/valgrind";
		argv[n++] = "--tool=callgrind";
		argv[n++] = cg_arg;
	}
	argv[n++] = dn;
	argv[n++] = "--listen";
	argv[n++] = listen;
	argv[n++] = "--metrics";
	argv[n++] = metrics;
	argv[n++] = "--ec";
	argv[n++] = (char *)o->ec;
	argv[n++] = "--marshaller";
	argv[n++] = (char *)prof_mode_marshaller(pm);
	argv[n++] = "--data-io";
	argv[n++] = (char *)prof_mode_data_io(pm);
	if (prof_mode_discards(pm))
		argv[n++] = "--discard";
	tls_args(o, true, argv, &n);
	for (unsigned d = 0; d < k + m; d++) {
		char cmd[PATH_MAX + 128];

		drives[d] = malloc(PATH_MAX + 64);
		if (drives[d])
			snprintf(drives[d], PATH_MAX + 64, "%s/run%u-%s/d%u", o->drives_base, idx,
			         mode, d);
		if (drives[d])
			snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", drives[d]);
		if (!drives[d] || system(cmd) != 0) {
			for (unsigned i = 0; i <= d; i++)
				free(drives[i]);
			return -EIO;
		}
		argv[n++] = "--drive";
		argv[n++] = drives[d];
	}
	argv[n] = NULL;

	dn_pid = prof_spawn(argv, log_path);
	if (dn_pid < 0) {
		for (unsigned d = 0; d < k + m; d++)
			free(drives[d]);
		return dn_pid;
	}
	rc = prof_wait_ready(dn_pid, dn_mport, tool == TOOL_CALLGRIND ? 60000 : 15000);
	if (rc < 0) {
		fprintf(stderr, "zest-prof: datanode did not start (%s); see %s\n", strerror(-rc),
		        log_path);
		goto stop;
	}
	if (o->s3) {
		char *gargv[24] = { gw,         "--listen",     gw_listen,       "--datanode",
			            listen,     "--metrics",    gw_metrics,      "--access-key",
			            "zestprof", "--secret-key", "zestprofsecret" };
		unsigned gn = 11;

		tls_args(o, false, gargv, &gn);
		gargv[gn] = NULL;

		gw_pid = prof_spawn(gargv, log_path);
		rc = gw_pid < 0 ? gw_pid : prof_wait_ready(gw_pid, gw_mport, 15000);
		if (rc < 0) {
			fprintf(stderr, "zest-prof: gateway did not start; see %s\n", log_path);
			goto stop;
		}
	}
	/*
	 * A warm-up run first, so that the CPU and payload counters read around the measured
	 * run see steady state only (zest-bench creates the bucket it writes to).
	 */
	snprintf(conc, sizeof(conc), "%u", o->concurrent);
	snprintf(target, sizeof(target), "127.0.0.1:%d", o->s3 ? gw_port : dn_port);
	if (load(o, bench, target, conc, o->warmup, false, out, sizeof(out)) != 0) {
		rc = -EIO;
		fprintf(stderr, "zest-prof: warm-up failed; see %s\n", log_path);
		goto stop;
	}
	if (read_counters(dn_mport, &c0) < 0) {
		rc = -EPROTO;
		fprintf(stderr, "zest-prof: no payload counters at %s/metrics\n", metrics);
		goto stop;
	}
	if (tool == TOOL_PERF) {
		char pid_s[48], secs[32];
		uint64_t d;
		char *pargv[] = { "/usr/bin/perf",
			          "record",
			          "-e",
			          "cpu-clock",
			          "-F",
			          "999",
			          "--call-graph",
			          (char *)o->call_graph,
			          "-o",
			          perf_out,
			          "-p",
			          pid_s,
			          "--",
			          "sleep",
			          secs,
			          NULL };

		/* The measured load only (not the warm-up, nor zest-bench's clean-up of its
		 * objects after it). Software clock: these VMs have no hardware counters. */
		zc_parse_duration_ns(o->duration, &d);
		/* Through S3 the gateway is profiled too: its frames sit under "zest-s3gw". */
		if (gw_pid > 0)
			snprintf(pid_s, sizeof(pid_s), "%d,%d", (int)dn_pid, (int)gw_pid);
		else
			snprintf(pid_s, sizeof(pid_s), "%d", (int)dn_pid);
		snprintf(secs, sizeof(secs), "%.1f", (double)d / 1e9);
		perf_pid = prof_spawn(pargv, log_path);
	}
	if (tool == TOOL_CALLGRIND && callgrind_control(dn_pid, "-z", log_path) != 0) {
		rc = -EIO;
		fprintf(stderr, "zest-prof: callgrind_control -z failed; see %s\n", log_path);
		goto stop;
	}
	/* Threads first and last, so that the process figure spans every thread's. */
	r->n_groups = 0;
	th_ok = prof_threads_snapshot(dn_pid, &th0) >= 0;
	cpu0 = prof_cpu_seconds(dn_pid);
	rc = load(o, bench, target, conc, o->duration, tool == TOOL_PERF, out, sizeof(out));
	cpu1 = prof_cpu_seconds(dn_pid);
	th_ok = th_ok && prof_threads_snapshot(dn_pid, &th1) >= 0;
	if (rc != 0 || read_counters(dn_mport, &c1) < 0) {
		fprintf(stderr, "zest-prof: load run failed (exit %d); see %s\n", rc, log_path);
		rc = -EIO;
		goto stop;
	}
	if (tool == TOOL_CALLGRIND) {
		char dump[sizeof(cg_out) + 8];

		/* the first dump after --callgrind-out-file=F is F.1 */
		snprintf(dump, sizeof(dump), "%s.1", cg_out);
		if (callgrind_control(dn_pid, "-d", log_path) == 0)
			ipb = callgrind_total(dump) / (c1.received - c0.received);
	}
	r->v[PROF_M_MIBS] = prof_json_number(out, "mib_per_s");
	r->v[PROF_M_P50] = prof_json_number(out, "p50");
	r->v[PROF_M_P99] = prof_json_number(out, "p99");
	r->v[PROF_M_CPU] = (cpu1 - cpu0) / ((c1.received - c0.received) / GIB);
	r->v[PROF_M_COPIED] = (c1.copied - c0.copied) / (c1.received - c0.received);
	r->v[PROF_M_RSS] = prof_peak_rss_mib(dn_pid);
	r->v[PROF_M_IPB] = ipb;
	if (th_ok)
		thread_groups(&th0, &th1, cpu1 - cpu0, (c1.received - c0.received) / GIB, r);
	rc = 0;
stop:
	prof_threads_fini(&th0);
	prof_threads_fini(&th1);
	if (perf_pid > 0)
		prof_stop(perf_pid, 10000);
	if (gw_pid > 0)
		prof_stop(gw_pid, 10000);
	prof_stop(dn_pid, tool == TOOL_CALLGRIND ? 60000 : 10000);
	for (unsigned d = 0; d < k + m; d++)
		free(drives[d]);
	snprintf(dir, sizeof(dir), "rm -rf '%s/run%u-%s'", o->drives_base, idx, mode);
	if (system(dir) != 0)
		ZC_WARN("prof", "cannot remove the drive folders of run %u", idx);
	return rc;
}

/* Median of the finite values of one metric over runs; NAN when none. */
static double
median_of(const struct run *runs, unsigned n, enum prof_metric mt)
{
	double v[MAX_PAIRS];
	unsigned k = 0;

	for (unsigned i = 0; i < n; i++)
		if (isfinite(runs[i].v[mt]))
			v[k++] = runs[i].v[mt];
	return k ? zc_median(v, k) : NAN;
}

/* Median over rounds of mode / base; NAN where a ratio means nothing (0 / 0). */
static double
ratio_of(const struct run *base, const struct run *mode, unsigned n, enum prof_metric mt)
{
	double v[MAX_PAIRS];
	unsigned k = 0;

	for (unsigned i = 0; i < n; i++)
		if (isfinite(mode[i].v[mt]) && isfinite(base[i].v[mt]) && base[i].v[mt] != 0)
			v[k++] = mode[i].v[mt] / base[i].v[mt];
	return k ? zc_median(v, k) : NAN;
}

static int
group_desc(const void *a, const void *b)
{
	const struct prof_thread_group *x = a, *y = b;

	return x->cpu_s < y->cpu_s ? 1 : x->cpu_s > y->cpu_s ? -1 : strcmp(x->name, y->name);
}

/*
 * Per-thread medians of one mode: every group seen in any of its runs, a run without it
 * counting 0 (it had no such threads), largest first.
 */
static void
median_groups(const struct run *runs, unsigned n, struct prof_mode_summary *ms)
{
	ms->n_groups = 0;
	for (unsigned i = 0; i < n; i++)
		for (unsigned g = 0; g < runs[i].n_groups; g++) {
			unsigned j;

			for (j = 0; j < ms->n_groups; j++)
				if (!strcmp(ms->groups[j].name, runs[i].groups[g].name))
					break;
			if (j == ms->n_groups && ms->n_groups < PROF_MAX_GROUPS)
				ms->groups[ms->n_groups++] = runs[i].groups[g];
		}
	for (unsigned j = 0; j < ms->n_groups; j++) {
		double v[MAX_PAIRS];

		for (unsigned i = 0; i < n; i++) {
			v[i] = 0;
			for (unsigned g = 0; g < runs[i].n_groups; g++)
				if (!strcmp(ms->groups[j].name, runs[i].groups[g].name))
					v[i] = runs[i].groups[g].cpu_s;
		}
		ms->groups[j].cpu_s = zc_median(v, n);
	}
	qsort(ms->groups, ms->n_groups, sizeof(ms->groups[0]), group_desc);
}

static const char *const copy_frames[] = { "memcpy", "memmove", NULL };

/*
 * Folds work/perf.MODE.data (perf script) into PREFIX-MODE.folded and draws
 * PREFIX-MODE.svg. Returns the number of samples or -errno.
 */
static long
draw_flame(const struct opts *o, enum prof_mode pm, struct prof_flame_out *fo)
{
	const char *mode = prof_mode_name(pm);
	char data[PATH_MAX + 32], title[256];
	struct prof_flame *f;
	FILE *out;
	long n;

	snprintf(data, sizeof(data), "%s/perf.%s.data", o->work, mode);
	snprintf(fo->svg, sizeof(fo->svg), "%s-%s.svg", o->flame, mode);
	snprintf(fo->folded, sizeof(fo->folded), "%s-%s.folded", o->flame, mode);
	fo->copy_share = NAN;
	n = prof_flame_create(&f);
	if (n < 0)
		goto done;
	n = prof_flame_read_perf_data(f, data);
	if (n == 0)
		n = -ENODATA;
	if (n < 0)
		goto destroy;
	fo->copy_share = prof_flame_share(f, copy_frames);
	out = fopen(fo->folded, "w");
	if (!out || prof_flame_write_folded(f, out) < 0 || fclose(out) != 0) {
		n = -EIO;
		goto destroy;
	}
	snprintf(title, sizeof(title),
	         "%s, %s marshaller, %s data cells%s: %s load, %s objects, %u streams (perf "
	         "cpu-clock, "
	         "%s unwinding)",
	         o->s3 ? "zest-datanode and zest-s3gw" : "zest-datanode", prof_mode_marshaller(pm),
	         prof_mode_data_io(pm), prof_mode_discards(pm) ? " with --discard" : "",
	         o->s3 ? "S3" : "gRPC", o->obj_size, o->concurrent, o->call_graph);
	out = fopen(fo->svg, "w");
	if (!out || prof_flame_write_svg(f, out, title, 0, copy_frames) < 0 || fclose(out) != 0)
		n = -EIO;
destroy:
	prof_flame_destroy(f);
done:
	fo->samples = n;
	if (n < 0)
		fprintf(stderr, "zest-prof: no flame graph for %s (%s); perf's output is in %s\n",
		        mode, strerror((int)-n), log_path);
	return n;
}

static int
parse_opts(int argc, char **argv, struct opts *o)
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

	while ((opt = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (opt) {
		case 'p':
			o->pairs = (unsigned)atoi(optarg);
			if (o->pairs < 3 || o->pairs > MAX_PAIRS) {
				fprintf(stderr, "zest-prof: --pairs must be 3..%d\n", MAX_PAIRS);
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
			usage(stdout);
			exit(0);
		case 'V':
			printf("zest-prof %s\n", ZEST_VERSION);
			exit(0);
		default:
			usage(stderr);
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
	    o->k + o->m > EC_MAX_DRIVES) {
		fprintf(stderr, "zest-prof: bad --ec '%s' (want K+M, K+M <= %d)\n", o->ec,
		        EC_MAX_DRIVES);
		return -EINVAL;
	}
	return 0;
bad:
	fprintf(stderr, "zest-prof: bad value '%s'\n", optarg);
	return -EINVAL;
}

/*
 * The store baseline of one round into r, sized to what the round's full-path modes stored
 * (their runs in `round`); a failure is reported and leaves NANs.
 */
static void
store_round(const struct opts *o, struct run (*runs)[MAX_PAIRS], unsigned round,
            struct prof_store_result *r)
{
	uint64_t bytes = STORE_MIN_BYTES, dur_ns = 0;
	int rc;

	zc_parse_duration_ns(o->duration, &dur_ns);
	for (unsigned i = 0; i < o->n_modes; i++) {
		double stored = runs[i][round].v[PROF_M_MIBS] * (1 << 20) * (double)dur_ns / 1e9 *
		                (o->k + o->m) / o->k;

		if (o->modes[i] != PROF_MODE_DISCARD && stored > (double)bytes)
			bytes = (uint64_t)stored;
	}
	rc = prof_store_measure(o->drives_base, o->k + o->m, bytes, r);

	if (rc < 0) {
		fprintf(stderr, "zest-prof: store baseline in %s failed: %s\n", o->drives_base,
		        strerror(-rc));
		r->mib_per_s = r->cpu_s_per_gib = r->user_s_per_gib = r->sys_s_per_gib = NAN;
	}
}

/* Median of the finite values of one field of the store results. */
static double
store_median(const struct prof_store_result *r, unsigned n, size_t field)
{
	double v[MAX_PAIRS];
	unsigned k = 0;

	for (unsigned i = 0; i < n; i++) {
		double x = *(const double *)((const char *)&r[i] + field);

		if (isfinite(x))
			v[k++] = x;
	}
	return k ? zc_median(v, k) : NAN;
}

/* Medians, ratios against the first mode, per-thread medians, the store and its floor. */
static void
summarize(const struct opts *o, struct run (*runs)[MAX_PAIRS],
          const struct prof_store_result *store, struct prof_summary *s)
{
	*s = (struct prof_summary){ .n_modes = o->n_modes,
		                    .rounds = o->pairs,
		                    .concurrent = o->concurrent,
		                    .k = o->k,
		                    .m = o->m,
		                    .obj_size = o->obj_size,
		                    .ec = o->ec,
		                    .drives = o->drives_base,
		                    .s3 = o->s3,
		                    .has_store = o->store_baseline,
		                    .floor = NAN };
	for (unsigned i = 0; i < o->n_modes; i++) {
		struct prof_mode_summary *ms = &s->mode[i];

		ms->mode = o->modes[i];
		for (int mt = 0; mt < PROF_M_COUNT; mt++) {
			ms->v[mt] = median_of(runs[i], o->pairs, (enum prof_metric)mt);
			ms->ratio[mt] =
			        i ? ratio_of(runs[0], runs[i], o->pairs, (enum prof_metric)mt)
			          : NAN;
		}
		median_groups(runs[i], o->pairs, ms);
	}
	if (!o->store_baseline)
		return;
	s->store.mib_per_s =
	        store_median(store, o->pairs, offsetof(struct prof_store_result, mib_per_s));
	s->store.cpu_s_per_gib =
	        store_median(store, o->pairs, offsetof(struct prof_store_result, cpu_s_per_gib));
	s->store.user_s_per_gib =
	        store_median(store, o->pairs, offsetof(struct prof_store_result, user_s_per_gib));
	s->store.sys_s_per_gib =
	        store_median(store, o->pairs, offsetof(struct prof_store_result, sys_s_per_gib));
	/* The floor: what --discard costs plus what the kernel charges to store (k+m)/k bytes
	 * per payload byte; the part of the full path no user-space change removes. */
	for (unsigned i = 0; i < o->n_modes; i++)
		if (o->modes[i] == PROF_MODE_DISCARD)
			s->floor = s->mode[i].v[PROF_M_CPU] +
			           (double)(o->k + o->m) / o->k * s->store.cpu_s_per_gib;
}

/* --s3 without a profiler: the PUT and GET phases of prof_s3.h. */
static int
s3_main(struct opts *o)
{
	struct prof_s3_opts so = { .bindir = o->bindir,
		                   .work = o->work,
		                   .drives = o->drives_base,
		                   .log = log_path,
		                   .tls_dir = o->tls_dir,
		                   .ec = o->ec,
		                   .obj_size_text = o->obj_size,
		                   .k = o->k,
		                   .m = o->m,
		                   .rounds = o->pairs,
		                   .concurrent = o->concurrent,
		                   .objects = o->objects,
		                   .n_modes = o->n_modes,
		                   .json = o->json,
		                   .ops = { o->ops[0], o->ops[1] },
		                   .plaintext = o->plaintext,
		                   .unix_link = o->unix_link };
	int rc;

	if (o->svg)
		fprintf(stderr,
		        "zest-prof: --svg draws no chart with --s3 (--json has the figures)\n");
	memcpy(so.modes, o->modes, sizeof(so.modes));
	zc_parse_size(o->obj_size, &so.obj_size);
	zc_parse_duration_ns(o->duration, &so.duration_ns);
	zc_parse_duration_ns(o->warmup, &so.warmup_ns);
	rc = prof_s3_main(&so);
	if (rc < 0)
		o->keep = true;
	return rc;
}

int
main(int argc, char **argv)
{
	struct opts o = { .ec = "4+2",
		          .obj_size = "4MiB",
		          .duration = "8s",
		          .warmup = "1s",
		          .pairs = 3,
		          .concurrent = 4,
		          .call_graph = "dwarf",
		          .n_modes = 2,
		          .ops = { true, true },
		          .modes = { PROF_MODE_COPY, PROF_MODE_ZEROCOPY } };
	static struct run runs[PROF_MAX_MODES][MAX_PAIRS], extra[PROF_MAX_MODES];
	static struct prof_store_result store[MAX_PAIRS];
	static struct prof_summary sum;
	char flame_prefix[PATH_MAX + 8];
	char exe[PATH_MAX], *slash;
	bool legacy;
	ssize_t len;
	int rc = 0;

	zc_log_init();
	if (parse_opts(argc, argv, &o) < 0)
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
	snprintf(log_path, sizeof(log_path), "%s/prof.log", o.work);

	if (o.s3 && !o.perf && !o.callgrind) {
		rc = s3_main(&o);
		goto out;
	}
	for (unsigned p = 0; p < o.pairs && rc == 0; p++) {
		if (!o.json)
			fprintf(stderr, "zest-prof: %s %u/%u\n", legacy ? "pair" : "round", p + 1,
			        o.pairs);
		for (unsigned i = 0; i < o.n_modes && rc == 0; i++)
			rc = run_once(&o, o.modes[i], p, TOOL_NONE, &runs[i][p]);
		if (rc == 0 && o.store_baseline)
			store_round(&o, runs, p, &store[p]);
	}
	if (rc < 0) {
		o.keep = true;
		goto out;
	}
	summarize(&o, runs, store, &sum);
	if (o.callgrind) {
		unsigned i;

		if (!o.json)
			fprintf(stderr, "zest-prof: callgrind runs (slow)\n");
		for (i = 0; i < o.n_modes; i++)
			if (run_once(&o, o.modes[i], 100, TOOL_CALLGRIND, &extra[i]) != 0)
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
			run_once(&o, o.modes[i], 200, TOOL_PERF, &extra[i]);
		for (unsigned i = 0; i < o.n_modes; i++)
			draw_flame(&o, o.modes[i], &sum.mode[i].flame);
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
