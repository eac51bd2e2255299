/* rpc_cluster's private half: the record rules (rpc_cluster_check.c) that the encoders and
 * decoders (rpc_cluster.c) share. Each returns 0, or -1 with the broken rule in why. */
#ifndef ZEST_RPC_CLUSTER_INTERNAL_H
#define ZEST_RPC_CLUSTER_INTERNAL_H

#include <stddef.h>

#include "rpc_cluster.h"

int rpc_cl_why(char *why, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int rpc_cl_check_node(const struct rpc_cl_node *v, char *why, size_t cap);
int rpc_cl_check_member(const struct rpc_cl_member *v, char *why, size_t cap);
int rpc_cl_check_object(const struct rpc_cl_object *v, char *why, size_t cap);
int rpc_cl_check_upload(const struct rpc_cl_upload *v, char *why, size_t cap);

#endif
