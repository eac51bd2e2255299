/*
 * dn_daemon: the zest-datanode program's configuration: its flags (dn_config.c), which
 * set both the engine's options (struct dn_store_opts, dn.h) and the gRPC binding's and
 * the daemon's own (dn_rpc.h, main.c). The engine itself never sees this struct.
 */
#ifndef ZEST_DN_DAEMON_H
#define ZEST_DN_DAEMON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "dn.h"
#include "rpc_tls.h"

struct dn_config {
	const char *config; /* --config FILE, read before the flags; NULL: none */
	char *listen;
	char *metrics;
	const char *drives[DN_MAX_DRIVES];
	unsigned ndrives;
	unsigned k, m;
	uint64_t cell_size;
	bool zerocopy;    /* --marshaller zerocopy (default) | copy */
	bool data_direct; /* --data-io buffered (default) | direct */
	bool discard;
	unsigned write_quorum;
	unsigned stripes_per_group;
	uint64_t inflight_cap;
	uint64_t adm_l1_ns, adm_l2_ns, adm_l3_ns;
	/* The gRPC binding (dn_rpc.h) and the daemon's shutdown. */
	unsigned write_workers;    /* threads running Write calls' engine work; default 4 */
	unsigned readers;          /* threads streaming Read calls; default 4 */
	uint64_t call_cap;         /* payload bytes queued per Write call before it pauses; 8 MiB */
	uint64_t grace_ns;         /* SIGTERM: how long in-flight calls may finish; default 5 s */
	uint64_t heal_interval_ns; /* background healer period; default 60 s, 0 off */
	uint64_t scrub_rate;       /* --scrub-rate: bytes/s the scrubber reads; 16 MiB/s, 0 off */
	uint64_t scrub_every_ns;   /* --scrub-interval: between scrub pass starts; 7 d, 0 off */
	bool heal;                 /* `zest-datanode heal --drive ...`: heal all drives and exit */
	int heal_drive;            /* with heal: --heal-drive N heals only drive N; -1: all */
	struct rpc_tls tls;        /* --tls-ca/--tls-cert/--tls-key, or --insecure (one required) */
	char *unix_socket;         /* --unix-socket: a local link beside --listen; NULL: none */
	/* Cluster mode (dn_cluster.h): all NULL without --cluster. */
	char *cluster;          /* --cluster: etcd endpoints */
	char *node;             /* --node: this node's name */
	char *advertise;        /* --advertise: host:port others dial; default: --listen's */
	uint64_t gc_grace_ns;   /* --gc-grace: pending cells' age before the collector; 10 min */
	uint64_t read_grace_ns; /* --read-grace: retired cells' life after a read; 0: gc_grace */
	uint64_t heal_after_ns; /* --heal-after: absence before a node's cells move; 10 min */
	char *zone;             /* --zone: failure domain; NULL: the node's own */
	uint64_t reserve;       /* --reserve: bytes kept free per drive; 1 GiB */
};

/*
 * Parse argv (defaults first). Returns 0 to run, 1 when --help/--version printed to out,
 * -EINVAL with a one-line message on err for a bad flag. Strings point into argv.
 */
int dn_config_parse(struct dn_config *cfg, int argc, char **argv, FILE *out, FILE *err);
/* Turn a parsed config into store options (drives point into cfg). */
void dn_config_to_opts(const struct dn_config *cfg, struct dn_store_opts *opts);

#endif
