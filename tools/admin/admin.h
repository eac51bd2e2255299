/*
 * zest-admin's commands beyond status and ok-to-stop, one file each (admin_main.c parses the
 * flags and dispatches). Each returns the process exit code.
 */
#ifndef ZEST_ADMIN_H
#define ZEST_ADMIN_H

#include <stdbool.h>

#include "cl_etcd.h"
#include "rpc_tls.h"

#define ADMIN_EXIT_ETCD 3 /* etcd could not be read */

/*
 * nodes (admin_nodes.c): every node the cluster knows, with its zone, state (live,
 * absent, unverified), capacity, used and free space, and the cells the records place on
 * it. tls: the files to check each registration's identity with (NULL or insecure: none).
 */
int admin_cmd_nodes(struct cl_etcd *c, const struct rpc_tls *tls, bool json, unsigned timeout_ms);

#endif
