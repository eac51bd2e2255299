/*
 * zest-prof's daemons for one run: a fresh zest-datanode in one mode (its marshaller,
 * --data-io, --discard) on k+m new drive folders, optionally under valgrind's callgrind, and
 * optionally zest-s3gw in front of it; free loopback ports, output appended to the log;
 * and their stop. The gRPC rounds (prof_grpc.h) and --s3 (prof_s3.h) both start theirs here.
 *
 * Threading: the caller's thread.
 */
#ifndef ZEST_PROF_DAEMON_H
#define ZEST_PROF_DAEMON_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

#include "prof_modes.h"

/* The gateway's S3 keys. */
#define PROF_ACCESS_KEY "zestprof"
#define PROF_SECRET_KEY "zestprofsecret"

struct prof_daemon_cfg {
	const char *bindir; /* the build's tools/ folder: ../datanode, ../s3gw beside it */
	const char *log;    /* the daemons' stdout and stderr */
	const char *ec;     /* --ec K+M, with k and m */
	unsigned k, m;
	const char *tls_dir; /* the certificates of tools/zest-certs.sh; NULL: --insecure */
	bool gateway;        /* zest-s3gw in front of the datanode */
	/* the datanode's --unix-socket, the gateway's link to it (no TLS: the local link; the
	 * TCP port keeps tls_dir's); NULL: the gateway over TCP */
	const char *unix_sock;
	const char *callgrind_out; /* the datanode under callgrind writing here; NULL: not */
};

struct prof_daemons {
	pid_t dn, gw;                             /* -1: not running */
	int dn_port, dn_mport, gw_port, gw_mport; /* gRPC, its /metrics; S3, its /metrics */
	unsigned stop_ms;                         /* the datanode's time to exit at SIGTERM */
	char drives[PATH_MAX];                    /* the run's folder, drive folders d0.. inside */
};

/*
 * Starts the daemons of cfg in mode pm, the drive folders in `drives` (made, and removed by
 * prof_daemons_stop), and waits until their /metrics answer. Returns 0, or -errno after
 * saying which did not start on stderr; either way d is for prof_daemons_stop.
 */
int prof_daemons_start(const struct prof_daemon_cfg *cfg, enum prof_mode pm, const char *drives,
                       struct prof_daemons *d);

/*
 * SIGTERM to the gateway, then the datanode (it holds the gateway's connection), and removes
 * the drive folders. Returns 0, or -EIO after saying so when a daemon did not exit 0 (a leak
 * or a crash at shutdown is a bug a run must not hide).
 */
int prof_daemons_stop(struct prof_daemons *d, const char *log);

/*
 * Appends the datanode's (server) or a client's (the gateway, zest-bench grpc) security
 * flags from dir's certificates to argv at *n; dir NULL: --insecure. The strings are static,
 * one set for each side.
 */
void prof_tls_args(const char *dir, bool server, char **argv, unsigned *n);

#endif
