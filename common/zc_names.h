/*
 * zc_names: the rules for bucket names and object keys, one copy for the gateway (what a
 * client may name) and the datanode (what the store takes from any caller of its gRPC
 * port). Pure functions over the caller's bytes; any thread.
 *
 * Buckets: S3's strict, DNS-compatible rules. Keys: 1..ZC_KEY_MAX bytes of UTF-8 without
 * NUL and without a "." or ".." path segment. The gateway keeps its own records in
 * reserved buckets (ZC_RESERVED_BUCKET) whose names break the S3 rules on purpose, so no
 * client can name them; the datanode accepts exactly these besides the S3 names.
 */
#ifndef ZEST_ZC_NAMES_H
#define ZEST_ZC_NAMES_H

#include <stdbool.h>
#include <stddef.h>

#define ZC_BUCKET_NAME_MIN 3
#define ZC_BUCKET_NAME_MAX 63
#define ZC_KEY_MAX         1024

/* The gateway's multipart records and parts: starts with '.', so never an S3 name. */
#define ZC_RESERVED_BUCKET ".zest-mpu"

/* n bytes of well-formed UTF-8: no overlong forms, no surrogates, nothing past U+10FFFF.
 * NUL is a valid code point here (the key check refuses it). */
bool zc_utf8_valid(const void *s, size_t n);

/*
 * Why name is not a bucket name, for a message ("is shorter than 3 bytes", "has a byte
 * other than a-z, 0-9, '.' and '-'", ...), or NULL when it is one. reserved_ok: the
 * reserved names pass too (the datanode's rule); false: S3's rule (the gateway's).
 */
const char *zc_bucket_name_fault(const char *name, bool reserved_ok);

/* S3's rule: a name a client may give a bucket (reserved names fail). */
bool zc_bucket_name_valid(const char *name);

/* One of zest's reserved bucket names. */
bool zc_bucket_name_reserved(const char *name);

enum zc_key_fault {
	ZC_KEY_OK,
	ZC_KEY_EMPTY,
	ZC_KEY_TOO_LONG, /* over ZC_KEY_MAX bytes */
	ZC_KEY_NUL,      /* a NUL byte */
	ZC_KEY_BAD_UTF8,
	ZC_KEY_DOT_SEGMENT, /* "." or ".." between slashes (clients and proxies rewrite them) */
};

/* Check the n bytes at k as a key. */
enum zc_key_fault zc_key_check(const char *k, size_t n);

/* zc_key_check() == ZC_KEY_OK. */
bool zc_key_valid(const char *k, size_t n);

/* "is empty", "is longer than 1024 bytes", ... ("" for ZC_KEY_OK). */
const char *zc_key_fault_text(enum zc_key_fault f);

/*
 * Why s (n bytes: a listing's prefix, start-after or delimiter, any of them may be empty)
 * cannot be one: "is longer than 1024 bytes" (no key is longer), "contains NUL", "is not
 * valid UTF-8" (a listing echoes them, and keys are UTF-8); NULL when it can.
 */
const char *zc_list_arg_fault(const char *s, size_t n);

#endif
