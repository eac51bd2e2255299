/* zest-prof --s3: the gateway and the datanode through S3, PUT and GET (prof_s3.h). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_s3_load.h"
#include "prof_proc.h"
#include "prof_s3.h"
#include "prof_s3_report.h"
#include "prof_threads.h"
#include "zc.h"

#define GIB           (1024.0 * 1024.0 * 1024.0)
#define MAX_ROUNDS    32
#define EC_MAX_DRIVES 32
#define ACCESS_KEY    "zestprof"
#define SECRET_KEY    "zestprofsecret"
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

struct daemons {
	pid_t pid[P_COUNT];
	int mport[P_COUNT];
	int gw_port;
	char drives[PATH_MAX];
};

static char metrics_text[1 << 20];

/* Folder of the certificates: --tls-dir, or one made once in the work folder. */
static const char *
certs_dir(const struct prof_s3_opts *o)
{
	static char dir[PATH_MAX];
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

static int
read_snap(pid_t pid, int mport, enum proc p, struct proc_snap *s)
{
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
phase_figures(const struct proc_snap *b, const struct proc_snap *a, const struct daemons *d,
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
	ph->v[PROF_S3_RSS_GW] = prof_peak_rss_mib(d->pid[P_GW]);
	ph->v[PROF_S3_RSS_DN] = prof_peak_rss_mib(d->pid[P_DN]);
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
phase(const struct prof_s3_opts *o, const struct daemons *d, struct bench_s3_load *load,
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
		reset_peak_rss(d->pid[p]);
	/* threads first and last, so that the process figures span every thread's */
	rc = read_snap(d->pid[P_DN], d->mport[P_DN], P_DN, &b[P_DN]);
	rc = rc < 0 ? rc : read_snap(d->pid[P_GW], d->mport[P_GW], P_GW, &b[P_GW]);
	if (rc < 0)
		goto out;
	t0 = zc_now_ns();
	rc = bench_s3_load_run(load, mix, 0, o->duration_ns, false, total);
	t1 = zc_now_ns();
	{
		int r2 = read_snap(d->pid[P_GW], d->mport[P_GW], P_GW, &a[P_GW]);

		r2 = r2 < 0 ? r2 : read_snap(d->pid[P_DN], d->mport[P_DN], P_DN, &a[P_DN]);
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

/* The daemon's mTLS flags from dir; NULL: plaintext (--insecure). */
static void
tls_flags(const char *dir, bool server, char **argv, unsigned *n)
{
	static char ca[PATH_MAX + 16], cert[2][PATH_MAX + 16], key[2][PATH_MAX + 16];
	const char *name = server ? "datanode" : "gateway";

	if (!dir) { /* --plaintext */
		argv[(*n)++] = "--insecure";
		return;
	}
	snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
	snprintf(cert[server], sizeof(cert[0]), "%s/%s.pem", dir, name);
	snprintf(key[server], sizeof(key[0]), "%s/%s.key", dir, name);
	argv[(*n)++] = server ? "--tls-ca" : "--cluster-ca";
	argv[(*n)++] = ca;
	argv[(*n)++] = server ? "--tls-cert" : "--cluster-cert";
	argv[(*n)++] = cert[server];
	argv[(*n)++] = server ? "--tls-key" : "--cluster-key";
	argv[(*n)++] = key[server];
}

/*
 * Stops both daemons and removes the drive folders. Returns 0, or -EIO when a daemon did not
 * exit 0 on SIGTERM (a leak or a crash at shutdown is a bug the run must not hide).
 */
static int
stop_daemons(const struct prof_s3_opts *o, struct daemons *d)
{
	static const char *const names[P_COUNT] = { "zest-s3gw", "zest-datanode" };
	char cmd[PATH_MAX + 16];
	int rc = 0;

	/* the gateway first: it holds the datanode's connection */
	for (int p = 0; p < P_COUNT; p++) {
		int st = d->pid[p] > 0 ? prof_stop(d->pid[p], 10000) : 0;

		if (st != 0) {
			fprintf(stderr, "zest-prof: %s exited with status %d at SIGTERM; see %s\n",
			        names[p], st, o->log);
			rc = -EIO;
		}
	}
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d->drives);
	if (d->drives[0] && system(cmd) != 0)
		ZC_WARN("prof", "cannot remove %s", d->drives);
	return rc;
}

static int
start_daemons(const struct prof_s3_opts *o, const char *certs, enum prof_mode pm, unsigned round,
              struct daemons *d)
{
	char dn[PATH_MAX + 32], gw[PATH_MAX + 32], listen[32], metrics[32], gw_listen[32];
	char gw_metrics[32], drive[EC_MAX_DRIVES][PATH_MAX + 16], cmd[PATH_MAX + 32];
	char sock[PATH_MAX + 16], sock_target[PATH_MAX + 32];
	char *argv[96];
	unsigned n = 0;
	int dn_port = prof_free_port(), rc;

	*d = (struct daemons){ .pid = { -1, -1 },
		               .mport = { prof_free_port(), prof_free_port() },
		               .gw_port = prof_free_port() };
	snprintf(d->drives, sizeof(d->drives), "%s/s3run%u-%s", o->drives, round,
	         prof_mode_name(pm));
	snprintf(dn, sizeof(dn), "%s/../datanode/zest-datanode", o->bindir);
	snprintf(gw, sizeof(gw), "%s/../s3gw/zest-s3gw", o->bindir);
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", dn_port);
	snprintf(metrics, sizeof(metrics), "127.0.0.1:%d", d->mport[P_DN]);
	snprintf(gw_listen, sizeof(gw_listen), "127.0.0.1:%d", d->gw_port);
	snprintf(gw_metrics, sizeof(gw_metrics), "127.0.0.1:%d", d->mport[P_GW]);

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
	tls_flags(certs, true, argv, &n);
	if (o->unix_link) {
		snprintf(sock, sizeof(sock), "%s/dn.sock", o->work);
		snprintf(sock_target, sizeof(sock_target), "unix:%s", sock);
		argv[n++] = "--unix-socket";
		argv[n++] = sock;
	}
	for (unsigned i = 0; i < o->k + o->m; i++) {
		snprintf(drive[i], sizeof(drive[i]), "%s/d%u", d->drives, i);
		argv[n++] = "--drive";
		argv[n++] = drive[i];
	}
	argv[n] = NULL;
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", d->drives);
	if (system(cmd) != 0)
		return -EIO;
	for (unsigned i = 0; i < o->k + o->m; i++)
		if (mkdir(drive[i], 0755) < 0 && errno != EEXIST)
			return -errno;
	d->pid[P_DN] = prof_spawn(argv, o->log);
	rc = d->pid[P_DN] < 0 ? d->pid[P_DN] : prof_wait_ready(d->pid[P_DN], d->mport[P_DN], 15000);
	if (rc < 0) {
		fprintf(stderr, "zest-prof: datanode did not start (%s); see %s\n", strerror(-rc),
		        o->log);
		return rc;
	}
	n = 0;
	argv[n++] = gw;
	argv[n++] = "--listen";
	argv[n++] = gw_listen;
	argv[n++] = "--datanode";
	argv[n++] = o->unix_link ? sock_target : listen;
	argv[n++] = "--metrics";
	argv[n++] = gw_metrics;
	argv[n++] = "--access-key";
	argv[n++] = ACCESS_KEY;
	argv[n++] = "--secret-key";
	argv[n++] = SECRET_KEY;
	if (!o->unix_link)
		tls_flags(certs, false, argv, &n);
	argv[n] = NULL;
	d->pid[P_GW] = prof_spawn(argv, o->log);
	rc = d->pid[P_GW] < 0 ? d->pid[P_GW] : prof_wait_ready(d->pid[P_GW], d->mport[P_GW], 15000);
	if (rc < 0)
		fprintf(stderr, "zest-prof: gateway did not start (%s); see %s\n", strerror(-rc),
		        o->log);
	return rc;
}

/* One mode in one round: daemons up, warm-up, PUT phase, preload, GET phase, daemons down. */
static int
run_mode(const struct prof_s3_opts *o, const char *certs, enum prof_mode pm, unsigned round,
         struct prof_s3_phase *put, struct prof_s3_phase *get)
{
	unsigned put_mix[BENCH_S3_OPS] = { [BENCH_S3_PUT] = 100 };
	struct bench_stats total[BENCH_S3_OPS];
	struct bench_s3_load *load = NULL;
	char host[32];
	int stop;
	struct daemons d;
	struct bench_s3_config cfg = {
		.access_key = ACCESS_KEY,
		.secret_key = SECRET_KEY,
		.bucket = "zest-prof",
		.region = "us-east-1",
		.obj_size = o->obj_size,
		.concurrent = o->concurrent,
		.objects = o->objects,
	};
	int rc = start_daemons(o, certs, pm, round, &d);

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
	stop = stop_daemons(o, &d);
	return rc < 0 ? rc : stop;
}

int
prof_s3_main(const struct prof_s3_opts *opts)
{
	static struct prof_s3_phase phases[PROF_MAX_MODES * PROF_S3_OPS * MAX_ROUNDS];
	static struct prof_s3_summary sum;
	struct prof_s3_opts o = *opts;
	const char *certs;
	double load[3];
	int rc = 0;

	if (o.rounds > MAX_ROUNDS)
		o.rounds = MAX_ROUNDS;
	for (size_t i = 0; i < sizeof(phases) / sizeof(phases[0]); i++)
		for (int mt = 0; mt < PROF_S3_METRICS; mt++)
			phases[i].v[mt] = NAN;
	for (unsigned i = 0; i < o.n_modes; i++)
		if (prof_mode_discards(o.modes[i])) {
			fprintf(stderr,
			        "zest-prof: --s3 cannot run discard (GETs need the objects)\n");
			return -EINVAL;
		}
	if (!o.objects) {
		uint64_t fit = GET_SET_BYTES / (o.obj_size ? o.obj_size : 1);

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
	for (unsigned r = 0; r < o.rounds && rc == 0; r++) {
		if (!o.json)
			fprintf(stderr, "zest-prof: round %u/%u\n", r + 1, o.rounds);
		for (unsigned m = 0; m < o.n_modes && rc == 0; m++)
			rc = run_mode(
			        &o, certs, o.modes[m], r,
			        &phases[((size_t)m * PROF_S3_OPS + PROF_S3_PUT) * o.rounds + r],
			        &phases[((size_t)m * PROF_S3_OPS + PROF_S3_GET) * o.rounds + r]);
	}
	if (rc < 0)
		return rc;
	sum = (struct prof_s3_summary){ .n_modes = o.n_modes,
		                        .concurrent = o.concurrent,
		                        .objects = o.objects,
		                        .obj_size = o.obj_size_text,
		                        .ec = o.ec,
		                        .drives = o.drives,
		                        .load1 = NAN };
	memcpy(sum.modes, o.modes, sizeof(sum.modes));
	memcpy(sum.ops, o.ops, sizeof(sum.ops));
	sum.plaintext = o.plaintext;
	sum.unix_link = o.unix_link;
	if (getloadavg(load, 3) > 0)
		sum.load1 = load[0];
	prof_s3_summarize(phases, o.rounds, &sum);
	if (o.json)
		prof_s3_report_json(stdout, &sum);
	else
		prof_s3_report_table(stdout, &sum);
	return 0;
}
