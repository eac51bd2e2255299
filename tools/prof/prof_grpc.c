/* zest-prof's gRPC rounds (prof_grpc.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "prof_daemon.h"
#include "prof_grpc.h"
#include "prof_proc.h"
#include "prof_threads.h"
#include "zc.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

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
load(const struct prof_opts *o, char *bench, char *target, char *conc, const char *duration,
     bool keep, char *out, size_t n)
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
		            PROF_ACCESS_KEY,
		            "--secret-key",
		            PROF_SECRET_KEY,
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

	prof_tls_args(o->tls_dir, false, grpc_argv, &gn);
	grpc_argv[gn] = NULL;
	return prof_run_capture(o->s3 ? s3_argv : grpc_argv, out, n, o->log);
}

/* Per-thread CPU of the measured load: each group's CPU-s per payload GiB into r. */
static void
thread_groups(const struct prof_threads *before, const struct prof_threads *after,
              double process_cpu_s, double gib, struct prof_run *r)
{
	r->n_groups =
	        prof_threads_delta(before, after, process_cpu_s, 1.0 / (double)sysconf(_SC_CLK_TCK),
	                           r->groups, PROF_MAX_GROUPS);
	for (unsigned g = 0; g < r->n_groups; g++)
		r->groups[g].cpu_s /= gib;
}

/* perf record of the daemons (the gateway's frames sit under "zest-s3gw") for the measured
 * load; returns its pid or -errno. */
static pid_t
start_perf(const struct prof_opts *o, const struct prof_daemons *d, char *perf_out)
{
	char pid_s[48], secs[32];
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
	if (d->gw > 0)
		snprintf(pid_s, sizeof(pid_s), "%d,%d", (int)d->dn, (int)d->gw);
	else
		snprintf(pid_s, sizeof(pid_s), "%d", (int)d->dn);
	snprintf(secs, sizeof(secs), "%.1f", (double)o->duration_ns / 1e9);
	return prof_spawn(pargv, o->log);
}

int
prof_grpc_run(const struct prof_opts *o, enum prof_mode pm, unsigned idx, enum prof_tool tool,
              struct prof_run *r)
{
	const char *mode = prof_mode_name(pm);
	struct prof_threads th0 = { 0 }, th1 = { 0 };
	char bench[PATH_MAX + 64], drives[PATH_MAX + 64], metrics[64], target[64];
	char cg_out[PATH_MAX + 96], perf_out[PATH_MAX + 96], out[16384], conc[16];
	struct prof_daemon_cfg dc = { .bindir = o->bindir,
		                      .log = o->log,
		                      .ec = o->ec,
		                      .k = o->k,
		                      .m = o->m,
		                      .tls_dir = o->tls_dir,
		                      .gateway = o->s3 };
	struct prof_daemons d;
	struct payload_counters c0, c1;
	double cpu0, cpu1, ipb = NAN;
	pid_t perf_pid = -1;
	bool th_ok;
	int rc;

	snprintf(bench, sizeof(bench), "%s/zest-bench", o->bindir);
	snprintf(drives, sizeof(drives), "%s/run%u-%s", o->drives_base, idx, mode);
	snprintf(cg_out, sizeof(cg_out), "%s/callgrind.%s.out", o->work, mode);
	snprintf(perf_out, sizeof(perf_out), "%s/perf.%s.data", o->work, mode);
	if (tool == PROF_TOOL_CALLGRIND)
		dc.callgrind_out = cg_out;
	rc = prof_daemons_start(&dc, pm, drives, &d);
	if (rc < 0)
		goto stop;
	snprintf(metrics, sizeof(metrics), "127.0.0.1:%d", d.dn_mport);
	/*
	 * A warm-up run first, so that the CPU and payload counters read around the measured
	 * run see steady state only (zest-bench creates the bucket it writes to).
	 */
	snprintf(conc, sizeof(conc), "%u", o->concurrent);
	snprintf(target, sizeof(target), "127.0.0.1:%d", o->s3 ? d.gw_port : d.dn_port);
	if (load(o, bench, target, conc, o->warmup, false, out, sizeof(out)) != 0) {
		rc = -EIO;
		fprintf(stderr, "zest-prof: warm-up failed; see %s\n", o->log);
		goto stop;
	}
	if (read_counters(d.dn_mport, &c0) < 0) {
		rc = -EPROTO;
		fprintf(stderr, "zest-prof: no payload counters at %s/metrics\n", metrics);
		goto stop;
	}
	if (tool == PROF_TOOL_PERF)
		perf_pid = start_perf(o, &d, perf_out);
	if (tool == PROF_TOOL_CALLGRIND && callgrind_control(d.dn, "-z", o->log) != 0) {
		rc = -EIO;
		fprintf(stderr, "zest-prof: callgrind_control -z failed; see %s\n", o->log);
		goto stop;
	}
	/* Threads first and last, so that the process figure spans every thread's. */
	r->n_groups = 0;
	th_ok = prof_threads_snapshot(d.dn, &th0) >= 0;
	cpu0 = prof_cpu_seconds(d.dn);
	rc = load(o, bench, target, conc, o->duration, tool == PROF_TOOL_PERF, out, sizeof(out));
	cpu1 = prof_cpu_seconds(d.dn);
	th_ok = th_ok && prof_threads_snapshot(d.dn, &th1) >= 0;
	if (rc != 0 || read_counters(d.dn_mport, &c1) < 0) {
		fprintf(stderr, "zest-prof: load run failed (exit %d); see %s\n", rc, o->log);
		rc = -EIO;
		goto stop;
	}
	if (tool == PROF_TOOL_CALLGRIND) {
		char dump[sizeof(cg_out) + 8];

		/* the first dump after --callgrind-out-file=F is F.1 */
		snprintf(dump, sizeof(dump), "%s.1", cg_out);
		if (callgrind_control(d.dn, "-d", o->log) == 0)
			ipb = callgrind_total(dump) / (c1.received - c0.received);
	}
	r->v[PROF_M_MIBS] = prof_json_number(out, "mib_per_s");
	r->v[PROF_M_P50] = prof_json_number(out, "p50");
	r->v[PROF_M_P99] = prof_json_number(out, "p99");
	r->v[PROF_M_CPU] = (cpu1 - cpu0) / ((c1.received - c0.received) / GIB);
	r->v[PROF_M_COPIED] = (c1.copied - c0.copied) / (c1.received - c0.received);
	r->v[PROF_M_RSS] = prof_peak_rss_mib(d.dn);
	r->v[PROF_M_IPB] = ipb;
	if (th_ok)
		thread_groups(&th0, &th1, cpu1 - cpu0, (c1.received - c0.received) / GIB, r);
	rc = 0;
stop:
	prof_threads_fini(&th0);
	prof_threads_fini(&th1);
	if (perf_pid > 0)
		prof_stop(perf_pid, 10000);
	/* a daemon's failure at SIGTERM is reported; the figures of the run stand */
	prof_daemons_stop(&d, o->log);
	return rc;
}
