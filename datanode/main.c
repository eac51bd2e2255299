/*
 * zest-datanode: the storage engine behind the zest.Datanode gRPC service.
 *
 *   zest-datanode --drive DIR ... [flags]       serve until SIGTERM/SIGINT
 *   zest-datanode heal --drive DIR ... [flags]  rebuild missing cells on every drive, exit
 *
 * At SIGTERM/SIGINT the server stops accepting calls, gives in-flight calls a grace
 * period to finish (then cancels them: their writes abort, nothing partial is visible),
 * closes the store, and exits non-zero if any payload reference or gRPC buffer is still
 * alive, so every test that stops a datanode also checks for leaks.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dn.h" /* dn_store_lost_at_open (dn_store.h) */
#include "dn_cgc.h"
#include "dn_cheal.h"
#include "dn_cluster.h"
#include "dn_coord.h"
#include "dn_daemon.h"
#include "zc_fault.h"
#include "zc_net.h"
#include "dn_rpc.h"
#include "dn_scrub.h"
#include "rpc_server.h"
#include "rpc_stats.h"
#include "rpc_client.h"
#include "zc.h"

/* Heal one drive (only >= 0) or all of them, in index order. */
static int
heal_drives(struct dn_store *s, unsigned ndrives, int only)
{
	int rc = 0;

	for (unsigned d = 0; d < ndrives; d++) {
		uint64_t t0 = zc_now_ns();
		long n;

		if (only >= 0 && d != (unsigned)only)
			continue;
		n = dn_heal(s, d);
		if (n < 0) {
			ZC_ERR("datanode", "heal failed drive=%u err=%ld (%s)", d, n,
			       strerror((int)-n));
			rc = 1;
			continue;
		}
		ZC_INFO("datanode", "healed drive=%u cells=%ld ms=%.1f", d, n,
		        (double)(zc_now_ns() - t0) / 1e6);
	}
	return rc;
}

/* With --cluster the metrics hook shows membership after the binding's series. */
static struct dn_cluster *cluster;
static struct dn_cgc *collector; /* the cell collector, with --cluster */
static struct dn_cheal *healer;  /* the cluster healer, with --cluster */
static struct dn_coord *coord;   /* the coordinator of Writes, with --cluster */
static struct dn_scrub *scrub;   /* the scrubber, unless --scrub-rate/-interval 0 */

/* The healer found this decommissioned node empty: its registration goes. */
static void
retire_hook(void *arg)
{
	dn_cluster_retire(arg);
}

static void
metrics_hook(FILE *out, void *arg)
{
	dn_rpc_metrics(out, arg);
	if (cluster)
		dn_cluster_metrics(cluster, out);
	if (collector)
		dn_cgc_metrics(collector, out);
	if (healer)
		dn_cheal_metrics(healer, out);
	if (coord)
		dn_coord_metrics(coord, out);
	if (scrub)
		dn_scrub_metrics(scrub, out);
}

/* Register in etcd (cfg.cluster set): the address others dial is --advertise, else the
 * listen host with the port the server bound. */
static int
join_cluster(const struct dn_config *cfg, int port, bool store_fresh)
{
	struct dn_cluster_opts co = { .endpoints = cfg->cluster,
		                      .group_cells = cfg->k + cfg->m,
		                      .store_fresh = store_fresh,
		                      .node = cfg->node,
		                      .zone = cfg->zone,
		                      .reserve = cfg->reserve,
		                      .drives = cfg->drives,
		                      .ndrives = cfg->ndrives,
		                      /* https:// etcd endpoints: trust the cluster CA and show
		                       * this node's certificate, as on its gRPC port */
		                      .ca_file = cfg->tls.ca_file,
		                      .cert_file = cfg->tls.cert_file,
		                      .key_file = cfg->tls.key_file };
	char host[256], addr[300];
	unsigned lport;

	if (cfg->advertise) {
		co.address = cfg->advertise;
	} else {
		if (zc_hostport_split(cfg->listen, host, sizeof(host), &lport) ||
		    !strcmp(host, "0.0.0.0") || !strcmp(host, "::") || !host[0]) {
			ZC_ERR("datanode", "--cluster needs --advertise with --listen %s",
			       cfg->listen);
			return -EINVAL;
		}
		snprintf(addr, sizeof(addr), strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
		co.address = addr;
	}
	return dn_cluster_start(&co, &cluster);
}

int
main(int argc, char **argv)
{
	struct dn_config cfg;
	struct dn_store_opts so;
	struct dn_store *store = NULL;
	struct rpc_server_opts ro = { 0 };
	struct rpc_server_handlers h;
	struct dn_rpc_opts bo = { 0 };
	struct rpc_server *srv = NULL;
	struct dn_rpc *b = NULL;
	char mhost[256], drives[1024] = "", tls_err[RPC_TLS_ERR_MAX];
	unsigned mport = 0;
	sigset_t set;
	long live_refs, live_bufs;
	unsigned grace_ms;
	int rc, sig;

	zc_log_init();
	rc = dn_config_parse(&cfg, argc, argv, stdout, stderr);
	if (rc == 1)
		return 0;
	if (rc < 0)
		return 2;
#ifdef ZC_FAULTS
	if (zc_fault_env() < 0) /* a test build's fault points (zc_fault.h) */
		return 2;
#else
	if (getenv("ZEST_FAULTS"))
		ZC_WARN("datanode", "ZEST_FAULTS ignored: built without -Dtest_faults");
#endif
	if (cfg.metrics && zc_hostport_split(cfg.metrics, mhost, sizeof(mhost), &mport)) {
		fprintf(stderr, "zest-datanode: bad value for --metrics: %s\n", cfg.metrics);
		return 2;
	}
	/* Bad certificates stop us before the drives are opened, with the file's name. */
	if (!cfg.heal && rpc_tls_check(&cfg.tls, tls_err, sizeof(tls_err))) {
		fprintf(stderr, "zest-datanode: TLS: %s\n", tls_err);
		return 2;
	}
	/* In a cluster the certificate is the node's identity: peers and gateways only count
	 * a node whose certificate names it (docs/cluster.md, "Membership"). */
	if (!cfg.heal && cfg.cluster && !cfg.tls.insecure &&
	    rpc_tls_cert_names(&cfg.tls, cfg.node, tls_err, sizeof(tls_err))) {
		fprintf(stderr, "zest-datanode: TLS: %s: --node %s needs a certificate naming it\n",
		        tls_err, cfg.node);
		return 2;
	}
	/* The signals go to sigwait below, never to a gRPC or drive thread. */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (!cfg.heal && rpc_tune_malloc())
		ZC_WARN("datanode", "mallopt failed; keeping glibc's malloc defaults");

	dn_config_to_opts(&cfg, &so);
	rc = dn_store_open(&so, &store);
	if (rc) {
		ZC_ERR("datanode", "cannot open the store err=%d (%s)", rc, strerror(-rc));
		return 1;
	}
	if (cfg.heal) {
		rc = heal_drives(store, cfg.ndrives, cfg.heal_drive);
		dn_store_close(store);
		return rc;
	}
	bo.write_workers = cfg.write_workers;
	bo.readers = cfg.readers;
	bo.call_cap = (size_t)cfg.call_cap;
	bo.cluster = cfg.cluster != NULL;
	rc = dn_rpc_create(store, &bo, &b, &h);
	if (rc) {
		ZC_ERR("datanode", "cannot start the binding err=%d", rc);
		goto close_store;
	}
	ro.listen = cfg.listen;
	ro.cq_threads = 2;
	ro.marshaller = cfg.zerocopy ? RPC_MARSHAL_ZEROCOPY : RPC_MARSHAL_COPY;
	ro.tls = cfg.tls;
	ro.unix_socket = cfg.unix_socket;
	if (cfg.tls.insecure)
		ZC_WARN("datanode",
		        "tls=off reason=--insecure: plaintext gRPC, any process that "
		        "reaches %s can read, overwrite and delete every object",
		        cfg.listen);
	rc = rpc_server_create(&ro, &h, &srv);
	if (rc) {
		ZC_ERR("datanode", "cannot listen on %s err=%d (%s)", cfg.listen, rc,
		       strerror(-rc));
		goto destroy_binding;
	}
	if (cfg.cluster) {
		/* a store that lost cells (empty metadata, an emptied drive): its cellcheck key
		 * goes before the node registers */
		rc = join_cluster(&cfg, rpc_server_port(srv), dn_store_lost_at_open(store));
		if (!rc)
			rc = dn_cgc_create(
			        &(struct dn_cgc_opts){ .store = store,
			                               .etcd = dn_cluster_etcd(cluster),
			                               .node = cfg.node,
			                               .grace_ns = cfg.gc_grace_ns,
			                               .read_grace_ns = cfg.read_grace_ns },
			        &collector);
		if (!rc)
			rc = dn_coord_create(
			        &(struct dn_coord_opts){ .store = store,
			                                 .etcd = dn_cluster_etcd(cluster),
			                                 .members = dn_cluster_members(cluster),
			                                 .node = cfg.node,
			                                 .k = cfg.k,
			                                 .m = cfg.m,
			                                 .cell_size = (uint32_t)cfg.cell_size,
			                                 .stripes_per_group = cfg.stripes_per_group,
			                                 .write_quorum = cfg.write_quorum,
			                                 .gc_grace_ns = cfg.gc_grace_ns,
			                                 .tls = cfg.tls },
			        &coord);
		if (!rc)
			dn_rpc_set_coord(b, coord);
		if (!rc)
			rc = dn_cheal_create(
			        &(struct dn_cheal_opts){ .store = store,
			                                 .etcd = dn_cluster_etcd(cluster),
			                                 .members = dn_cluster_members(cluster),
			                                 .node = cfg.node,
			                                 .tls = cfg.tls,
			                                 .heal_after_ns = cfg.heal_after_ns,
			                                 .gc_grace_ns = cfg.gc_grace_ns,
			                                 .retire = retire_hook,
			                                 .retire_arg = cluster },
			        &healer);
		if (rc) {
			dn_cluster_leave(cluster);
			rpc_server_destroy(srv, 0);
			goto destroy_binding;
		}
	}
	if (cfg.scrub_rate && cfg.scrub_every_ns && !cfg.discard &&
	    dn_scrub_create(&(struct dn_scrub_opts){ .store = store,
	                                             .rate_bps = cfg.scrub_rate,
	                                             .interval_ns = cfg.scrub_every_ns },
	                    &scrub))
		ZC_WARN("datanode", "cannot start the scrubber; serving without it");
	/* /metrics answers last: tools and tests take it as "ready", gRPC included. */
	if (cfg.metrics) {
		dn_metrics_set_hook(store, metrics_hook, store);
		rc = dn_metrics_serve(store, cfg.metrics, &mport);
		if (rc) {
			ZC_ERR("datanode", "cannot serve metrics on %s err=%d (%s)", cfg.metrics,
			       rc, strerror(-rc));
			dn_cluster_leave(cluster);
			rpc_server_destroy(srv, 0);
			goto destroy_binding;
		}
	}
	for (unsigned i = 0; i < cfg.ndrives; i++) {
		size_t n = strlen(drives);

		snprintf(drives + n, sizeof(drives) - n, "%s%s", i ? "," : "", cfg.drives[i]);
	}
	ZC_INFO("datanode",
	        "started version=%s listen=%s port=%d metrics=%s drives=%s scheme=%u+%u "
	        "cell_size=%llu marshaller=%s data_io=%s discard=%d write_workers=%u readers=%u "
	        "call_queue_cap=%llu tls=%s unix_socket=%s config=%s",
	        ZEST_VERSION, cfg.listen, rpc_server_port(srv), cfg.metrics ? cfg.metrics : "off",
	        drives, cfg.k, cfg.m, (unsigned long long)cfg.cell_size,
	        cfg.zerocopy ? "zerocopy" : "copy", cfg.data_direct ? "direct" : "buffered",
	        cfg.discard, cfg.write_workers, cfg.readers, (unsigned long long)cfg.call_cap,
	        cfg.tls.insecure ? "off" : "mtls", cfg.unix_socket ? cfg.unix_socket : "off",
	        cfg.config ? cfg.config : "none");

	sigwait(&set, &sig);
	grace_ms = (unsigned)(cfg.grace_ns / 1000000);
	ZC_INFO("datanode", "signal=%d: stopping (grace %llu ms)", sig,
	        (unsigned long long)(cfg.grace_ns / 1000000));
	/* leave the cluster first, so nobody picks this node while it drains */
	dn_cluster_leave(cluster);
	rpc_server_destroy(srv, grace_ms);
	rc = 0;
destroy_binding:
	dn_rpc_destroy(b);
	dn_coord_destroy(coord); /* every Write ended: its follow-up calls may still run */
close_store:
	/* the collector stops before the store goes; its metrics still answer */
	dn_cgc_stop(collector);
	dn_cheal_stop(healer);
	dn_scrub_stop(scrub);
	dn_store_close(store); /* the metrics thread too: the cluster's series are done */
	dn_cgc_destroy(collector);
	dn_cheal_destroy(healer);
	dn_scrub_destroy(scrub);
	dn_cluster_destroy(cluster);
	/* peers' channels still reconnecting let go of gRPC on its own threads: not under exit */
	rpc_shutdown_wait(5000);
	live_refs = zc_ref_live();
	live_bufs = rpc_live_buffers();
	if (live_refs || live_bufs) {
		ZC_ERR("datanode", "leak at exit: zc_ref_live=%ld rpc_live_buffers=%ld", live_refs,
		       live_bufs);
		return 3;
	}
	if (rc)
		return 1;
	ZC_INFO("datanode", "stopped cleanly");
	return 0;
}
