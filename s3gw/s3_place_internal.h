/*
 * s3_place_internal: where objects live over a --datanode list, and the merge of
 * per-datanode listings (s3_place.c). Private to s3gw/ (the rpc backend, multipart upload
 * ids); tests reach it through s3_internal_dep. Pure functions: any thread.
 */
#ifndef ZEST_S3_PLACE_INTERNAL_H
#define ZEST_S3_PLACE_INTERNAL_H

#include <stdint.h>

#include "s3.h"

/*
 * Rendezvous (highest-random-weight) hashing: the index in [0, n) of the datanode that owns
 * bucket/key, nodes named by their --datanode address. Adding or removing one node moves
 * only the keys that node gains or owned. n must be >= 1. Pure function, any thread.
 */
unsigned s3_place(const char *const *nodes, unsigned n, const char *bucket, const char *key);

/* The 64-bit placement hash of bucket/key. Multipart upload ids end with the target's
 * hash (16 hex digits), so s3_place() puts the parts "p/<upload-id>/<n>" of
 * S3_RESERVED_BUCKET on the datanode that will hold the completed object. */
uint64_t s3_obj_hash(const char *bucket, const char *key);

/*
 * Merge per-datanode listings (each in key order, each cut at `limit` items) into out: at
 * most limit keys + common prefixes in key order, a prefix reported by several nodes once.
 * A node whose listing was truncated bounds the merge at its last item (beyond it, that
 * node may hold smaller keys not yet seen); out is then truncated with next_start_after
 * the last item emitted. Inputs are borrowed; out gets copies. 0 or -ENOMEM.
 */
int s3_list_merge(const struct s3_list_result *const *parts, unsigned n, unsigned limit,
                  struct s3_list_result *out);

#endif
