/* zest-prof's daemons for one run (prof_daemon.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "prof_daemon.h"
#include "prof_opts.h"
#include "prof_proc.h"
#include "zc.h"

void
prof_tls_args(const char *dir, bool server, char **argv, unsigned *n)
{
	static char ca[PATH_MAX + 16], cert[2][PATH_MAX + 16], key[2][PATH_MAX + 16];
	const char *name = server ? "datanode" : "gateway";

	if (!dir) {
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

static int
start_datanode(const struct prof_daemon_cfg *cfg, enum prof_mode pm, struct prof_daemons *d)
{
	static char cg_arg[PATH_MAX + 128];
	char dn[PATH_MAX + 32], listen[32], metrics[32], cmd[PATH_MAX + 32];
	char drive[PROF_MAX_DRIVES][PATH_MAX + 16];
	char *argv[96];
	unsigned n = 0;
	int rc;

	snprintf(dn, sizeof(dn), "%s/../datanode/zest-datanode", cfg->bindir);
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", d->dn_port);
	snprintf(metrics, sizeof(metrics), "127.0.0.1:%d", d->dn_mport);
	if (cfg->callgrind_out) {
		snprintf(cg_arg, sizeof(cg_arg), "--callgrind-out-file=%s", cfg->callgrind_out);
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
	argv[n++] = (char *)cfg->ec;
	argv[n++] = "--marshaller";
	argv[n++] = (char *)prof_mode_marshaller(pm);
	argv[n++] = "--data-io";
	argv[n++] = (char *)prof_mode_data_io(pm);
	if (prof_mode_discards(pm))
		argv[n++] = "--discard";
	prof_tls_args(cfg->tls_dir, true, argv, &n);
	if (cfg->unix_sock) {
		argv[n++] = "--unix-socket";
		argv[n++] = (char *)cfg->unix_sock;
	}
	for (unsigned i = 0; i < cfg->k + cfg->m; i++) {
		snprintf(drive[i], sizeof(drive[i]), "%s/d%u", d->drives, i);
		argv[n++] = "--drive";
		argv[n++] = drive[i];
	}
	argv[n] = NULL;
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", d->drives);
	if (system(cmd) != 0)
		return -EIO;
	for (unsigned i = 0; i < cfg->k + cfg->m; i++)
		if (mkdir(drive[i], 0755) < 0 && errno != EEXIST)
			return -errno;
	d->dn = prof_spawn(argv, cfg->log);
	/* under callgrind the datanode starts (and stops) many times slower */
	rc = d->dn < 0 ? d->dn
	               : prof_wait_ready(d->dn, d->dn_mport, cfg->callgrind_out ? 60000 : 15000);
	if (rc < 0)
		fprintf(stderr, "zest-prof: datanode did not start (%s); see %s\n", strerror(-rc),
		        cfg->log);
	return rc;
}

static int
start_gateway(const struct prof_daemon_cfg *cfg, struct prof_daemons *d)
{
	char gw[PATH_MAX + 32], listen[32], datanode[PATH_MAX + 32], metrics[32];
	char *argv[32];
	unsigned n = 0;
	int rc;

	snprintf(gw, sizeof(gw), "%s/../s3gw/zest-s3gw", cfg->bindir);
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", d->gw_port);
	if (cfg->unix_sock)
		snprintf(datanode, sizeof(datanode), "unix:%s", cfg->unix_sock);
	else
		snprintf(datanode, sizeof(datanode), "127.0.0.1:%d", d->dn_port);
	snprintf(metrics, sizeof(metrics), "127.0.0.1:%d", d->gw_mport);
	argv[n++] = gw;
	argv[n++] = "--listen";
	argv[n++] = listen;
	argv[n++] = "--datanode";
	argv[n++] = datanode;
	argv[n++] = "--metrics";
	argv[n++] = metrics;
	argv[n++] = "--access-key";
	argv[n++] = PROF_ACCESS_KEY;
	argv[n++] = "--secret-key";
	argv[n++] = PROF_SECRET_KEY;
	if (!cfg->unix_sock)
		prof_tls_args(cfg->tls_dir, false, argv, &n);
	argv[n] = NULL;
	d->gw = prof_spawn(argv, cfg->log);
	rc = d->gw < 0 ? d->gw : prof_wait_ready(d->gw, d->gw_mport, 15000);
	if (rc < 0)
		fprintf(stderr, "zest-prof: gateway did not start (%s); see %s\n", strerror(-rc),
		        cfg->log);
	return rc;
}

int
prof_daemons_start(const struct prof_daemon_cfg *cfg, enum prof_mode pm, const char *drives,
                   struct prof_daemons *d)
{
	int rc;

	*d = (struct prof_daemons){ .dn = -1,
		                    .gw = -1,
		                    .dn_port = prof_free_port(),
		                    .dn_mport = prof_free_port(),
		                    .gw_port = prof_free_port(),
		                    .gw_mport = prof_free_port(),
		                    .stop_ms = cfg->callgrind_out ? 60000 : 10000 };
	snprintf(d->drives, sizeof(d->drives), "%s", drives);
	rc = start_datanode(cfg, pm, d);
	if (rc == 0 && cfg->gateway)
		rc = start_gateway(cfg, d);
	return rc;
}

int
prof_daemons_stop(struct prof_daemons *d, const char *log)
{
	const pid_t pid[2] = { d->gw, d->dn };
	static const char *const names[2] = { "zest-s3gw", "zest-datanode" };
	const unsigned ms[2] = { 10000, d->stop_ms };
	char cmd[PATH_MAX + 16];
	int rc = 0;

	for (int p = 0; p < 2; p++) {
		int st = pid[p] > 0 ? prof_stop(pid[p], ms[p]) : 0;

		if (st != 0) {
			fprintf(stderr, "zest-prof: %s exited with status %d at SIGTERM; see %s\n",
			        names[p], st, log);
			rc = -EIO;
		}
	}
	d->gw = d->dn = -1;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d->drives);
	if (d->drives[0] && system(cmd) != 0)
		ZC_WARN("prof", "cannot remove %s", d->drives);
	return rc;
}
