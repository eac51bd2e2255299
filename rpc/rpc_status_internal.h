/* rpc_status_internal.h: errors <-> gRPC status, the one place gRPC's codes meet zest's
 * errors (rpc_status.c). For rpc/'s server and client and for tests that check what the
 * wire carries. */
#ifndef ZEST_RPC_STATUS_INTERNAL_H
#define ZEST_RPC_STATUS_INTERNAL_H

#include <grpc/grpc.h>
#include <grpc/status.h>

#include "rpc.h"

/*
 * Map an error (zc_err.h: -errno or ZC_E(code)) to the gRPC status the wire carries:
 * NoSuchBucket/NoSuchKey NOT_FOUND, BucketAlreadyOwnedByYou ALREADY_EXISTS,
 * BucketNotEmpty/PreconditionFailed FAILED_PRECONDITION, InvalidArgument INVALID_ARGUMENT,
 * BadDigest DATA_LOSS, SlowDown/no space/changed RESOURCE_EXHAUSTED, no quorum/unreachable
 * UNAVAILABLE, canceled CANCELLED, NotImplemented UNIMPLEMENTED, anything else INTERNAL.
 */
grpc_status_code rpc_status_from_err(int err);

/* For a status that came without a "zest-err" trailer (transport, deadline, a peer of
 * another kind): the error it stands for (OK -> 0). */
int rpc_err_from_status(grpc_status_code code);

/* For a status that came without a "zest-err" trailer (transport, deadline, a peer of
 * another kind): the error it stands for (OK -> 0). */
int rpc_err_from_status(grpc_status_code code);

/* The client's one translation of a received status: st->err from the RPC_ERR_KEY trailer
 * when the peer sent one, else rpc_err_from_status(code); st->msg from details. */
void rpc_status_from_wire(struct rpc_status *st, grpc_status_code code, grpc_slice details,
                          const grpc_metadata_array *trailing);

#endif
