/*
 * zest-prof: copy against zero-copy, side by side, on the same machine in the same run.
 *
 * For each of --pairs pairs it starts a fresh datanode with --marshaller copy, drives
 * load at it, stops it, then does the same with --marshaller zerocopy (optionally with
 * the S3 gateway in front). Per run it measures throughput and latency (from
 * zest-bench), the datanode's CPU seconds per GiB received (/proc/PID/stat against
 * zest_payload_received_bytes_total), payload bytes copied in user space per payload
 * byte (/metrics), and peak RSS (VmHWM). Ratios are zerocopy / copy, the median of the
 * per-pair ratios, so slow drifts of a noisy machine cancel out.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "prof_flame.h"
#include "prof_proc.h"
#include "zc.h"

#define MAX_PAIRS     32
#define EC_MAX_DRIVES 32
#define GIB       (1024.0 * 1024.0 * 1024.0)

enum metric { M_MIBS, M_CPU, M_COPIED, M_P50, M_P99, M_RSS, M_IPB, M_COUNT };
static const char *const metric_keys[M_COUNT] = { "mib_per_s", "cpu_s_per_gib",
						  "copied_per_byte", "p50_ms",
						  "p99_ms",	  "peak_rss_mib",
						  "instructions_per_byte" };
static const char *const metric_titles[M_COUNT] = {
	"throughput MiB/s", "datanode CPU-s/GiB", "copied bytes/byte", "latency p50 ms",
	"latency p99 ms",   "datanode peak RSS MiB", "instructions/byte"
};

struct opts {
	const char *drives_base, *svg, *ec, *obj_size, *duration, *warmup;
	const char *flame, *call_graph;
	unsigned pairs, concurrent;
	bool s3, json, callgrind, perf, keep;
	char bindir[PATH_MAX], work[PATH_MAX];
};

struct run {
	double v[M_COUNT];
};

static char log_path[PATH_MAX + 32];

static void
usage(FILE *out)
{
	fprintf(out,
		"usage: zest-prof [options]\n"
		"  --pairs N          copy/zerocopy pairs, alternating (default 3, min 3)\n"
		"  --drives DIR       folder for the drive folders (default: a fresh tmpfs dir\n"
		"                     under /dev/shm, removed at the end)\n"
		"  --ec K+M           datanode scheme (default 4+2)\n"
		"  --obj.size SIZE    object size (default 4MiB)\n"
		"  --concurrent N     parallel streams (default 4)\n"
		"  --duration D       measured load per run (default 8s)\n"
		"  --warmup D         uncounted load before it (default 1s)\n"
		"  --s3               drive the load through zest-s3gw (zest-bench s3 put)\n"
		"  --json             {\"copy\":{...},\"zerocopy\":{...},\"ratio\":{...}}\n"
		"  --svg FILE         write a bar chart\n"
		"  --callgrind        also run each mode once under valgrind's callgrind and\n"
		"                     report instructions per payload byte of the measured\n"
		"                     run (dumps kept in the work folder)\n"
		"  --perf             also record each mode once with perf (cpu-clock, 999 Hz; the\n"
		"                     datanode, and the gateway with --s3) and draw a flame\n"
		"                     graph of each: PREFIX-copy.svg and\n"
		"                     PREFIX-zerocopy.svg, with the folded stacks beside them\n"
		"                     (PREFIX-MODE.folded); where perf works\n"
		"  --flame PREFIX     where --perf writes (default: WORK/flame); implies --perf\n"
		"  --perf-call-graph M  perf's unwinder: dwarf (default; whole stacks without\n"
		"                     frame pointers) or fp\n"
		"  --keep             keep the work folder (logs, drives, profiles)\n");
}

static void
sibling(const struct opts *o, const char *rel, char *out, size_t n)
{
	snprintf(out, n, "%s/%s", o->bindir, rel);
}

/* Wait until the /metrics endpoint answers, or the process died. */
static int
wait_ready(pid_t pid, int metrics_port, unsigned timeout_ms)
{
	char buf[256];

	for (unsigned t = 0; t < timeout_ms; t += 50) {
		char path[64];

		if (prof_http_get(metrics_port, "/metrics", buf, sizeof(buf)) >= 0)
			return 0;
		snprintf(path, sizeof(path), "/proc/%d", (int)pid);
		if (access(path, F_OK) < 0)
			return -ECHILD;
		usleep(50000);
	}
	return -ETIMEDOUT;
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
load(const struct opts *o, char *bench, char *target, char *conc, const char *duration,
     bool keep, char *out, size_t n)
{
	char *grpc_argv[] = { bench, "grpc", "--datanode", target, "--obj.size",
			      (char *)o->obj_size, "--concurrent", conc, "--duration",
			      (char *)duration, "--json", NULL };
	char *s3_argv[] = { bench, "s3", "put", "--host", target, "--access-key", "zestprof",
			    "--secret-key", "zestprofsecret", "--obj.size", (char *)o->obj_size,
			    "--concurrent", conc, "--duration", (char *)duration, "--warmup", "0s",
			    "--json", keep ? "--noclear" : NULL, NULL };

	return prof_run_capture(o->s3 ? s3_argv : grpc_argv, out, n, log_path);
}

static int
run_once(const struct opts *o, const char *mode, unsigned idx, enum tool tool, struct run *r)
{
	char dn[PATH_MAX + 64], gw[PATH_MAX + 64], bench[PATH_MAX + 64], dir[PATH_MAX + 64];
	char listen[64], metrics[64], gw_listen[64], gw_metrics[64], target[64];
	char cg_out[PATH_MAX + 96], perf_out[PATH_MAX + 96], out[16384], conc[16];
	char *argv[64], *drives[EC_MAX_DRIVES];
	unsigned k, m, n = 0;
	int dn_port = prof_free_port(), dn_mport = prof_free_port();
	int gw_port = prof_free_port(), gw_mport = prof_free_port();
	struct payload_counters c0, c1;
	double cpu0, cpu1, ipb = NAN;
	pid_t dn_pid, gw_pid = -1, perf_pid = -1;
	int rc;

	if (sscanf(o->ec, "%u+%u", &k, &m) != 2 || k + m > EC_MAX_DRIVES)
		return -EINVAL;
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
	argv[n++] = (char *)mode;
	for (unsigned d = 0; d < k + m; d++) {
		char cmd[PATH_MAX + 128];

		drives[d] = malloc(PATH_MAX + 64);
		snprintf(drives[d], PATH_MAX + 64, "%s/run%u-%s/d%u", o->drives_base, idx, mode, d);
		snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", drives[d]);
		if (system(cmd) != 0)
			return -EIO;
		argv[n++] = "--drive";
		argv[n++] = drives[d];
	}
	argv[n] = NULL;

	dn_pid = prof_spawn(argv, log_path);
	if (dn_pid < 0)
		return dn_pid;
	rc = wait_ready(dn_pid, dn_mport, tool == TOOL_CALLGRIND ? 60000 : 15000);
	if (rc < 0) {
		fprintf(stderr, "zest-prof: datanode did not start (%s); see %s\n", strerror(-rc),
			log_path);
		goto stop;
	}
	if (o->s3) {
		char *gargv[] = { gw, "--listen", gw_listen, "--datanode", listen, "--metrics",
				  gw_metrics, "--access-key", "zestprof", "--secret-key",
				  "zestprofsecret", NULL };

		gw_pid = prof_spawn(gargv, log_path);
		rc = gw_pid < 0 ? gw_pid : wait_ready(gw_pid, gw_mport, 15000);
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
		char *pargv[] = { "/usr/bin/perf", "record", "-e", "cpu-clock", "-F", "999",
				  "--call-graph", (char *)o->call_graph, "-o", perf_out, "-p",
				  pid_s, "--", "sleep", secs, NULL };

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
	cpu0 = prof_cpu_seconds(dn_pid);
	rc = load(o, bench, target, conc, o->duration, tool == TOOL_PERF, out, sizeof(out));
	cpu1 = prof_cpu_seconds(dn_pid);
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
	r->v[M_MIBS] = prof_json_number(out, "mib_per_s");
	r->v[M_P50] = prof_json_number(out, "p50");
	r->v[M_P99] = prof_json_number(out, "p99");
	r->v[M_CPU] = (cpu1 - cpu0) / ((c1.received - c0.received) / GIB);
	r->v[M_COPIED] = (c1.copied - c0.copied) / (c1.received - c0.received);
	r->v[M_RSS] = prof_peak_rss_mib(dn_pid);
	r->v[M_IPB] = ipb;
	rc = 0;
stop:
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
median_of(const struct run *runs, unsigned n, enum metric mt)
{
	double v[MAX_PAIRS];
	unsigned k = 0;

	for (unsigned i = 0; i < n; i++)
		if (isfinite(runs[i].v[mt]))
			v[k++] = runs[i].v[mt];
	return k ? zc_median(v, k) : NAN;
}

/* Median over pairs of zerocopy / copy; NAN where a ratio means nothing (0 / 0). */
static double
ratio_of(const struct run *copy, const struct run *zc, unsigned n, enum metric mt)
{
	double v[MAX_PAIRS];
	unsigned k = 0;

	for (unsigned i = 0; i < n; i++)
		if (isfinite(zc[i].v[mt]) && isfinite(copy[i].v[mt]) && copy[i].v[mt] != 0)
			v[k++] = zc[i].v[mt] / copy[i].v[mt];
	return k ? zc_median(v, k) : NAN;
}

static void
json_number(FILE *out, double v)
{
	if (isfinite(v))
		fprintf(out, "%.6g", v);
	else
		fprintf(out, "null");
}

/* What --perf drew for one mode. */
struct flame_out {
	char svg[PATH_MAX + 32], folded[PATH_MAX + 32];
	long samples;	   /* -errno when there is no profile */
	double copy_share; /* share of samples with a user-space memcpy/memmove frame */
};

static const char *const copy_frames[] = { "memcpy", "memmove", NULL };

/*
 * Folds work/perf.MODE.data (perf script) into PREFIX-MODE.folded and draws
 * PREFIX-MODE.svg. Returns the number of samples or -errno.
 */
static long
draw_flame(const struct opts *o, const char *mode, struct flame_out *fo)
{
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
		 "%s, %s marshaller: %s load, %s objects, %u streams (perf cpu-clock, "
		 "%s unwinding)",
		 o->s3 ? "zest-datanode and zest-s3gw" : "zest-datanode", mode,
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

static void
print_json(const double *copy, const double *zc, const double *ratio, const struct opts *o,
	   const struct flame_out *fl)
{
	const double *sets[] = { copy, zc, ratio };
	const char *names[] = { "copy", "zerocopy", "ratio" };

	printf("{");
	for (int s = 0; s < 3; s++) {
		printf("%s\"%s\":{", s ? "," : "", names[s]);
		for (int mt = 0; mt < M_COUNT; mt++) {
			printf("%s\"%s\":", mt ? "," : "", metric_keys[mt]);
			json_number(stdout, sets[s][mt]);
		}
		printf("}");
	}
	printf(",\"pairs\":%u,\"via\":\"%s\",\"obj_size\":\"%s\",\"concurrent\":%u,\"ec\":\"%s\"",
	       o->pairs, o->s3 ? "s3" : "grpc", o->obj_size, o->concurrent, o->ec);
	if (fl) {
		printf(",\"flame\":{");
		for (int i = 0; i < 2; i++) {
			printf("%s\"%s\":{\"samples\":%ld", i ? "," : "", names[i],
			       fl[i].samples > 0 ? fl[i].samples : 0);
			if (fl[i].samples > 0) {
				printf(",\"svg\":");
				zc_json_string(stdout, fl[i].svg);
				printf(",\"folded\":");
				zc_json_string(stdout, fl[i].folded);
			}
			printf(",\"memcpy_share\":");
			json_number(stdout, fl[i].copy_share);
			printf("}");
		}
		printf("}");
	}
	printf("}\n");
}

static void
print_table(const double *copy, const double *zc, const double *ratio, const struct opts *o,
	    const struct flame_out *fl)
{
	printf("# zest-prof: %u pairs, %s load, %s objects, %u streams, RS %s, drives in %s\n",
	       o->pairs, o->s3 ? "S3 (through zest-s3gw)" : "gRPC", o->obj_size, o->concurrent,
	       o->ec, o->drives_base);
	printf("# medians over the pairs; ratio = median of per-pair zerocopy / copy\n");
	printf("%-24s %12s %12s %10s\n", "", "copy", "zerocopy", "ratio");
	for (int mt = 0; mt < M_COUNT; mt++) {
		if (!isfinite(copy[mt]) && !isfinite(zc[mt]))
			continue;
		printf("%-24s %12.4g %12.4g %10.3g\n", metric_titles[mt], copy[mt], zc[mt],
		       ratio[mt]);
	}
	for (int i = 0; fl && i < 2; i++)
		if (fl[i].samples > 0)
			printf("# flame graph, %s: %s (%ld samples, %.1f%% of them in a user-space "
			       "memcpy/memmove)\n",
			       i ? "zerocopy" : "copy", fl[i].svg, fl[i].samples,
			       100 * fl[i].copy_share);
}

/* One group of two bars per metric, each scaled to the larger of the two. */
static int
write_svg(const char *path, const double *copy, const double *zc)
{
	const int w = 760, row = 56, top = 40;
	FILE *f = fopen(path, "w");
	int y = top;

	if (!f)
		return -errno;
	fprintf(f, "<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' "
		   "font-family='sans-serif' font-size='12'>\n", w, top + row * M_COUNT + 30);
	fprintf(f, "<text x='10' y='20' font-size='15'>zest-prof: copy vs zero-copy "
		   "(bars scaled per metric)</text>\n");
	fprintf(f, "<rect x='520' y='8' width='12' height='12' fill='#c0504d'/>"
		   "<text x='536' y='19'>copy</text><rect x='590' y='8' width='12' height='12' "
		   "fill='#4f81bd'/><text x='606' y='19'>zerocopy</text>\n");
	for (int mt = 0; mt < M_COUNT; mt++) {
		double vals[2] = { copy[mt], zc[mt] }, max;
		const char *colors[2] = { "#c0504d", "#4f81bd" };

		if (!isfinite(vals[0]) || !isfinite(vals[1]))
			continue;
		max = vals[0] > vals[1] ? vals[0] : vals[1];
		fprintf(f, "<text x='10' y='%d'>%s</text>\n", y + 14, metric_titles[mt]);
		for (int b = 0; b < 2; b++) {
			int len = max > 0 ? (int)(vals[b] / max * 380) : 0;

			fprintf(f, "<rect x='200' y='%d' width='%d' height='18' fill='%s'/>"
				   "<text x='%d' y='%d'>%.4g</text>\n",
				y + b * 22, len, colors[b], 206 + len, y + b * 22 + 14, vals[b]);
		}
		y += row;
	}
	fprintf(f, "</svg>\n");
	fclose(f);
	return 0;
}

static int
parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "pairs", required_argument, NULL, 'p' },
		{ "drives", required_argument, NULL, 'd' },
		{ "ec", required_argument, NULL, 'e' },
		{ "obj.size", required_argument, NULL, 'z' },
		{ "concurrent", required_argument, NULL, 'c' },
		{ "duration", required_argument, NULL, 'D' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "s3", no_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "svg", required_argument, NULL, 'S' },
		{ "callgrind", no_argument, NULL, 'C' },
		{ "perf", no_argument, NULL, 'P' },
		{ "flame", required_argument, NULL, 'F' },
		{ "perf-call-graph", required_argument, NULL, 'G' },
		{ "keep", no_argument, NULL, 'k' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t tmp;
	int opt;

	while ((opt = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (opt) {
		case 'p':
			o->pairs = (unsigned)atoi(optarg);
			if (o->pairs < 3 || o->pairs > MAX_PAIRS) {
				fprintf(stderr, "zest-prof: --pairs must be 3..%d\n", MAX_PAIRS);
				return -EINVAL;
			}
			break;
		case 'd': o->drives_base = optarg; break;
		case 'e': o->ec = optarg; break;
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
		case 's': o->s3 = true; break;
		case 'j': o->json = true; break;
		case 'S': o->svg = optarg; break;
		case 'C': o->callgrind = true; break;
		case 'P': o->perf = true; break;
		case 'F':
			o->flame = optarg;
			o->perf = true;
			break;
		case 'G':
			if (strcmp(optarg, "dwarf") && strcmp(optarg, "fp"))
				goto bad;
			o->call_graph = optarg;
			break;
		case 'k': o->keep = true; break;
		case 'h': usage(stdout); exit(0);
		case 'V': printf("zest-prof %s\n", ZEST_VERSION); exit(0);
		default: usage(stderr); return -EINVAL;
		}
	}
	return 0;
bad:
	fprintf(stderr, "zest-prof: bad value '%s'\n", optarg);
	return -EINVAL;
}

int
main(int argc, char **argv)
{
	struct opts o = { .ec = "4+2", .obj_size = "4MiB", .duration = "8s", .warmup = "1s",
			  .pairs = 3, .concurrent = 4, .call_graph = "dwarf" };
	struct flame_out flames[2], *fl = NULL;
	char flame_prefix[PATH_MAX + 8];
	struct run copy[MAX_PAIRS], zc[MAX_PAIRS], extra[2];
	double mc[M_COUNT], mz[M_COUNT], ratio[M_COUNT];
	char exe[PATH_MAX], *slash;
	ssize_t len;
	int rc = 0;

	zc_log_init();
	if (parse_opts(argc, argv, &o) < 0)
		return 2;
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

	for (unsigned p = 0; p < o.pairs && rc == 0; p++) {
		if (!o.json)
			fprintf(stderr, "zest-prof: pair %u/%u\n", p + 1, o.pairs);
		rc = run_once(&o, "copy", p, TOOL_NONE, &copy[p]);
		if (rc == 0)
			rc = run_once(&o, "zerocopy", p, TOOL_NONE, &zc[p]);
	}
	if (rc < 0) {
		o.keep = true;
		goto out;
	}
	for (int mt = 0; mt < M_COUNT; mt++) {
		mc[mt] = median_of(copy, o.pairs, (enum metric)mt);
		mz[mt] = median_of(zc, o.pairs, (enum metric)mt);
		ratio[mt] = ratio_of(copy, zc, o.pairs, (enum metric)mt);
	}
	if (o.callgrind) {
		if (!o.json)
			fprintf(stderr, "zest-prof: callgrind runs (slow)\n");
		if (run_once(&o, "copy", 100, TOOL_CALLGRIND, &extra[0]) == 0 &&
		    run_once(&o, "zerocopy", 100, TOOL_CALLGRIND, &extra[1]) == 0) {
			mc[M_IPB] = extra[0].v[M_IPB];
			mz[M_IPB] = extra[1].v[M_IPB];
			ratio[M_IPB] = mz[M_IPB] / mc[M_IPB];
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
		run_once(&o, "copy", 200, TOOL_PERF, &extra[0]);
		run_once(&o, "zerocopy", 200, TOOL_PERF, &extra[1]);
		draw_flame(&o, "copy", &flames[0]);
		draw_flame(&o, "zerocopy", &flames[1]);
		fl = flames;
		fprintf(stderr, "zest-prof: perf data in %s/perf.{copy,zerocopy}.data "
				"(perf report -i FILE)\n", o.work);
		o.keep = true;
	}
	if (o.json)
		print_json(mc, mz, ratio, &o, fl);
	else
		print_table(mc, mz, ratio, &o, fl);
	if (o.svg && write_svg(o.svg, mc, mz) < 0)
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
