/* zest-prof --s3: the gateway and the datanode through S3, PUT and GET (prof_s3.h). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_s3_load.h"
#include "prof_daemon.h"
#include "prof_proc.h"
#include "prof_s3.h"
#include "prof_s3_report.h"
#include "prof_threads.h"
#include "zc.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
/* GETs read this many bytes of preloaded objects at most (at least 4 objects, at most two
 * per stream): enough for every stream to read its own object, small enough to preload in
 * a few seconds. */
#define GET_SET_BYTES (256ull << 20)

enum proc { P_GW, P_DN, P_COUNT };
static const char *const proc_prefix[P_COUNT] = { "gw:", "dn:" };

/* One process's figures at one instant. */
struct proc_snap {
	struct prof_threads th;
	double cpu_s;
	unsigned n_stages;
	struct prof_s3_named stages[PROF_S3_MAX_STAGES];
	struct prof_s3_named dir[4]; /* gateway: payload bytes in and out */
	unsigned n_dir;
};

static char metrics_text[1 << 20];

/* Folder of the certificates: --tls-dir, or one made once in the work folder. */
static const char *
certs_dir(const struct prof_opts *o)
{
	static char dir[PATH_MAX + 16];
	char script[PATH_MAX];
	int rc;

	if (o->tls_dir)
		return o->tls_dir;
	if (dir[0])
		return dir;
	snprintf(dir, sizeof(dir), "%s/certs", o->work);
	snprintf(script, sizeof(script), "%s",
	         getenv("ZEST_CERTS_SH") ? getenv("ZEST_CERTS_SH") : PROF_CERTS_SH);
	{
		char *argv[] = { "/bin/bash", script, dir, NULL };
		char out[4096];

		rc = prof_run_capture(argv, out, sizeof(out), o->log);
	}
	if (rc != 0) {
		fprintf(stderr, "zest-prof: %s %s failed (exit %d); see %s\n", script, dir, rc,
		        o->log);
		dir[0] = 0;
		return NULL;
	}
	return dir;
}

static pid_t
pid_of(const struct prof_daemons *d, enum proc p)
{
	return p == P_GW ? d->gw : d->dn;
}

/* Process p's figures now: its threads, CPU and payload counters (/metrics). */
static int
read_snap(const struct prof_daemons *d, enum proc p, struct proc_snap *s)
{
	pid_t pid = pid_of(d, p);
	int mport = p == P_GW ? d->gw_mport : d->dn_mport;

	if (prof_threads_snapshot(pid, &s->th) < 0)
		return -ESRCH;
	s->cpu_s = prof_cpu_seconds(pid);
	if (prof_http_get(mport, "/metrics", metrics_text, sizeof(metrics_text)) < 0)
		return -EIO;
	s->n_stages = prof_s3_parse_labelled(metrics_text, "zest_payload_copied_bytes_total",
	                                     "stage", s->stages, PROF_S3_MAX_STAGES);
	s->n_dir = p == P_GW ? prof_s3_parse_labelled(metrics_text, "zest_s3_payload_bytes_total",
	                                              "dir", s->dir, 4)
	                     : 0;
	return 0;
}

static double
named(const struct prof_s3_named *v, unsigned n, const char *name)
{
	for (unsigned i = 0; i < n; i++)
		if (!strcmp(v[i].name, name))
			return v[i].v;
	return 0;
}

/* Peak RSS from now on: writing 5 to clear_refs resets VmHWM to the current RSS. */
static void
reset_peak_rss(pid_t pid)
{
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/clear_refs", (int)pid);
	f = fopen(path, "w");
	if (f) {
		fputs("5", f);
		fclose(f);
	}
}

/* The phase's figures from the snapshots around it and the client's report. */
static void
phase_figures(const struct proc_snap *b, const struct proc_snap *a, const struct prof_daemons *d,
              enum prof_s3_op op, const char *client_json, double secs, double pagecache,
              struct prof_s3_phase *ph)
{
	const char *dir = op == PROF_S3_PUT ? "in" : "out";
	double bytes =
	        named(a[P_GW].dir, a[P_GW].n_dir, dir) - named(b[P_GW].dir, b[P_GW].n_dir, dir);
	double gib = bytes / GIB, tick = 1.0 / (double)sysconf(_SC_CLK_TCK);

	for (int i = 0; i < PROF_S3_METRICS; i++)
		ph->v[i] = NAN;
	/*
	 * Over the phase's wall time, tail included: the client counts an object that starts
	 * before the end and finishes after it, which with large objects and many streams
	 * (64 MiB x 40: ~20 s each) would count up to one object per stream too many.
	 */
	ph->v[PROF_S3_MIBS] = bytes / (1024.0 * 1024.0) / secs;
	ph->v[PROF_S3_OBJS] = prof_json_number(client_json, "objects") / secs;
	ph->v[PROF_S3_P50] = prof_json_number(client_json, "p50");
	ph->v[PROF_S3_P99] = prof_json_number(client_json, "p99");
	ph->v[PROF_S3_P999] = prof_json_number(client_json, "p99.9");
	ph->v[PROF_S3_ERRORS] = prof_json_number(client_json, "errors");
	ph->n_stages = ph->n_groups = 0;
	if (bytes <= 0)
		return;
	ph->v[PROF_S3_CPU_GW] = (a[P_GW].cpu_s - b[P_GW].cpu_s) / gib;
	ph->v[PROF_S3_CPU_DN] = (a[P_DN].cpu_s - b[P_DN].cpu_s) / gib;
	ph->v[PROF_S3_CPU_ALL] = ph->v[PROF_S3_CPU_GW] + ph->v[PROF_S3_CPU_DN];
	ph->v[PROF_S3_CPU_MS_OBJ] =
	        (a[P_GW].cpu_s - b[P_GW].cpu_s + a[P_DN].cpu_s - b[P_DN].cpu_s) * 1e3 /
	        prof_json_number(client_json, "objects");
	ph->v[PROF_S3_PAGECACHE] = pagecache / bytes;
	ph->v[PROF_S3_RSS_GW] = prof_peak_rss_mib(d->gw);
	ph->v[PROF_S3_RSS_DN] = prof_peak_rss_mib(d->dn);
	for (int p = 0; p < P_COUNT; p++) {
		struct prof_thread_group g[PROF_S3_MAX_GROUPS / 2];
		unsigned n = prof_threads_delta(&b[p].th, &a[p].th, a[p].cpu_s - b[p].cpu_s, tick,
		                                g, PROF_S3_MAX_GROUPS / 2);
		double copied = 0;

		for (unsigned i = 0; i < n && ph->n_groups < PROF_S3_MAX_GROUPS; i++) {
			struct prof_s3_named *t = &ph->groups[ph->n_groups++];

			snprintf(t->name, sizeof(t->name), "%s%.*s", proc_prefix[p],
			         (int)(sizeof(t->name) - 4), g[i].name);
			t->v = g[i].cpu_s / gib;
		}
		for (unsigned i = 0; i < a[p].n_stages; i++) {
			double v = a[p].stages[i].v -
			           named(b[p].stages, b[p].n_stages, a[p].stages[i].name);

			copied += v;
			if (ph->n_stages < PROF_S3_MAX_STAGES) {
				struct prof_s3_named *s = &ph->stages[ph->n_stages++];

				snprintf(s->name, sizeof(s->name), "%s%.*s", proc_prefix[p],
				         (int)(sizeof(s->name) - 4), a[p].stages[i].name);
				s->v = v / bytes;
			}
		}
		ph->v[p == P_GW ? PROF_S3_COPIED_GW : PROF_S3_COPIED_DN] = copied / bytes;
	}
}

/* One measured phase of op over the load; 0 or -errno. */
static int
phase(const struct prof_opts *o, const struct prof_daemons *d, struct bench_s3_load *load,
      enum prof_s3_op op, struct prof_s3_phase *ph)
{
	unsigned mix[BENCH_S3_OPS] = { 0 };
	struct proc_snap b[P_COUNT] = { 0 }, a[P_COUNT] = { 0 };
	struct bench_stats total[BENCH_S3_OPS];
	enum bench_s3_op bop = op == PROF_S3_PUT ? BENCH_S3_PUT : BENCH_S3_GET;
	char *json = NULL;
	size_t json_len = 0;
	int64_t pc0, pc1;
	uint64_t t0, t1;
	FILE *mem;
	int rc;

	mix[bop] = 100;
	pc0 = prof_s3_pagecache_bytes(d->drives);
	for (int p = 0; p < P_COUNT; p++)
		reset_peak_rss(pid_of(d, (enum proc)p));
	/* threads first and last, so that the process figures span every thread's */
	rc = read_snap(d, P_DN, &b[P_DN]);
	rc = rc < 0 ? rc : read_snap(d, P_GW, &b[P_GW]);
	if (rc < 0)
		goto out;
	t0 = zc_now_ns();
	rc = bench_s3_load_run(load, mix, 0, o->duration_ns, false, total);
	t1 = zc_now_ns();
	{
		int r2 = read_snap(d, P_GW, &a[P_GW]);

		r2 = r2 < 0 ? r2 : read_snap(d, P_DN, &a[P_DN]);
		rc = rc < 0 ? rc : r2;
	}
	pc1 = prof_s3_pagecache_bytes(d->drives);
	mem = open_memstream(&json, &json_len);
	if (mem) {
		bench_report_json(mem, &total[bop], o->duration_ns);
		fclose(mem);
	}
	if (total[bop].errors)
		fprintf(stderr, "zest-prof: %s: %llu errors, first: %s\n", bench_s3_op_names[bop],
		        (unsigned long long)total[bop].errors, total[bop].first_errors[0]);
	for (int i = 0; i < BENCH_S3_OPS; i++)
		bench_stats_fini(&total[i]);
	if (rc == 0 && json)
		phase_figures(b, a, d, op, json, (double)(t1 - t0) / 1e9,
		              pc0 >= 0 && pc1 >= 0 ? (double)(pc1 - pc0) : NAN, ph);
	else if (rc == 0)
		rc = -ENOMEM;
out:
	free(json);
	for (int p = 0; p < P_COUNT; p++) {
		prof_threads_fini(&b[p].th);
		prof_threads_fini(&a[p].th);
	}
	return rc;
}

/* One mode in one round: daemons up, warm-up, PUT phase, preload, GET phase, daemons down. */
static int
run_mode(const struct prof_opts *o, const char *certs, enum prof_mode pm, unsigned round,
         struct prof_s3_phase *put, struct prof_s3_phase *get)
{
	unsigned put_mix[BENCH_S3_OPS] = { [BENCH_S3_PUT] = 100 };
	struct bench_stats total[BENCH_S3_OPS];
	struct bench_s3_load *load = NULL;
	char host[32], drives[PATH_MAX + 32], sock[PATH_MAX + 16];
	int stop;
	struct prof_daemons d;
	struct prof_daemon_cfg dc = { .bindir = o->bindir,
		                      .log = o->log,
		                      .ec = o->ec,
		                      .k = o->k,
		                      .m = o->m,
		                      .tls_dir = certs,
		                      .gateway = true };
	struct bench_s3_config cfg = {
		.access_key = PROF_ACCESS_KEY,
		.secret_key = PROF_SECRET_KEY,
		.bucket = "zest-prof",
		.region = "us-east-1",
		.obj_size = o->obj_size_bytes,
		.concurrent = o->concurrent,
		.objects = o->objects,
	};
	int rc;

	if (o->unix_link) {
		snprintf(sock, sizeof(sock), "%s/dn.sock", o->work);
		dc.unix_sock = sock;
	}
	snprintf(drives, sizeof(drives), "%s/s3run%u-%s", o->drives_base, round,
	         prof_mode_name(pm));
	rc = prof_daemons_start(&dc, pm, drives, &d);
	snprintf(host, sizeof(host), "127.0.0.1:%d", d.gw_port);
	cfg.host = host;
	if (rc < 0)
		goto out;
	rc = bench_s3_load_create(&cfg, &load);
	if (rc < 0)
		goto out;
	/* The warm-up's objects stay: the drive folders go at the end, and DELETEs would
	 * only add work outside the phases. */
	rc = bench_s3_load_run(load, put_mix, 0, o->warmup_ns, false, total);
	for (int i = 0; i < BENCH_S3_OPS; i++)
		bench_stats_fini(&total[i]);
	if (o->ops[PROF_S3_PUT])
		rc = rc < 0 ? rc : phase(o, &d, load, PROF_S3_PUT, put);
	if (o->ops[PROF_S3_GET]) {
		rc = rc < 0 ? rc : bench_s3_load_preload(load);
		rc = rc < 0 ? rc : phase(o, &d, load, PROF_S3_GET, get);
	}
	if (rc < 0)
		fprintf(stderr, "zest-prof: %s round %u failed (%s); see %s\n", prof_mode_name(pm),
		        round + 1, strerror(-rc), o->log);
out:
	bench_s3_load_destroy(load);
	stop = prof_daemons_stop(&d, o->log);
	return rc < 0 ? rc : stop;
}

int
prof_s3_main(const struct prof_opts *opts)
{
	static struct prof_s3_phase phases[PROF_MAX_MODES * PROF_S3_OPS * PROF_MAX_PAIRS];
	static struct prof_s3_summary sum;
	struct prof_opts o = *opts; /* with the default --objects worked out */
	const char *certs;
	double load[3];
	int rc = 0;

	for (size_t i = 0; i < sizeof(phases) / sizeof(phases[0]); i++)
		for (int mt = 0; mt < PROF_S3_METRICS; mt++)
			phases[i].v[mt] = NAN;
	if (!o.objects) {
		uint64_t fit = GET_SET_BYTES / (o.obj_size_bytes ? o.obj_size_bytes : 1);

		o.objects = (unsigned)(fit < 2ull * o.concurrent ? fit : 2ull * o.concurrent);
		if (o.objects < 4)
			o.objects = 4;
	}
	if (o.plaintext) {
		certs = NULL;
		fprintf(stderr, "zest-prof: --s3, gateway to datanode in plaintext (--insecure)\n");
	} else if (o.unix_link) {
		certs = certs_dir(&o); /* the datanode's TCP port keeps its mTLS */
		if (!certs)
			return -EIO;
		fprintf(stderr, "zest-prof: --s3, gateway to datanode over its Unix socket\n");
	} else {
		certs = certs_dir(&o);
		if (!certs)
			return -EIO;
		fprintf(stderr, "zest-prof: --s3, gateway to datanode over mutual TLS (%s)\n",
		        certs);
	}
	for (unsigned r = 0; r < o.pairs && rc == 0; r++) {
		if (!o.json)
			fprintf(stderr, "zest-prof: round %u/%u\n", r + 1, o.pairs);
		for (unsigned m = 0; m < o.n_modes && rc == 0; m++)
			rc = run_mode(
			        &o, certs, o.modes[m], r,
			        &phases[((size_t)m * PROF_S3_OPS + PROF_S3_PUT) * o.pairs + r],
			        &phases[((size_t)m * PROF_S3_OPS + PROF_S3_GET) * o.pairs + r]);
	}
	if (rc < 0)
		return rc;
	sum = (struct prof_s3_summary){ .n_modes = o.n_modes,
		                        .concurrent = o.concurrent,
		                        .objects = o.objects,
		                        .obj_size = o.obj_size,
		                        .ec = o.ec,
		                        .drives = o.drives_base,
		                        .load1 = NAN };
	memcpy(sum.modes, o.modes, sizeof(sum.modes));
	memcpy(sum.ops, o.ops, sizeof(sum.ops));
	sum.plaintext = o.plaintext;
	sum.unix_link = o.unix_link;
	if (getloadavg(load, 3) > 0)
		sum.load1 = load[0];
	prof_s3_summarize(phases, o.pairs, &sum);
	if (o.json)
		prof_s3_report_json(stdout, &sum);
	else
		prof_s3_report_table(stdout, &sum);
	return 0;
}
