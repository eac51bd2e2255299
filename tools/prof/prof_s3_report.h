/*
 * zest-prof --s3's figures: what one PUT or GET phase measured against the datanode and the
 * gateway together, the medians over rounds, the ratios against the first mode, and the
 * text and JSON reports. Pure code on the caller's data (prof_s3.c measures); also the
 * parser of labelled /metrics series and the page-cache residency count of a folder.
 *
 * Threading: plain functions on the caller's data, except prof_s3_pagecache_bytes, which
 * walks the folder with nftw(3) and a file-static sum: one caller at a time.
 */
#ifndef ZEST_PROF_S3_REPORT_H
#define ZEST_PROF_S3_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "prof_modes.h"

/* The S3 operations measured, in this order in every round. */
enum prof_s3_op { PROF_S3_PUT, PROF_S3_GET, PROF_S3_OPS };

/* Per payload GiB or byte: the payload is the gateway's zest_s3_payload_bytes_total of the
 * phase (dir="in" for PUT, "out" for GET). */
enum prof_s3_metric {
	PROF_S3_MIBS, /* payload MiB/s (the client's count of whole objects) */
	PROF_S3_OBJS, /* objects per second */
	PROF_S3_P50,  /* latency per object, ms */
	PROF_S3_P99,
	PROF_S3_P999,
	PROF_S3_CPU_ALL, /* CPU-s per payload GiB, gateway + datanode (/proc) */
	PROF_S3_CPU_GW,
	PROF_S3_CPU_DN,
	PROF_S3_CPU_MS_OBJ, /* CPU-ms per object, gateway + datanode (small objects' figure) */
	PROF_S3_COPIED_GW,  /* user-space payload copies per payload byte (/metrics) */
	PROF_S3_COPIED_DN,
	PROF_S3_PAGECACHE, /* drive-file bytes the phase added to the page cache, per byte */
	PROF_S3_RSS_GW,    /* peak RSS in the phase, MiB (VmHWM, reset at its start) */
	PROF_S3_RSS_DN,
	PROF_S3_ERRORS, /* failed requests */
	PROF_S3_METRICS
};

/* "put", "get". */
const char *prof_s3_op_name(enum prof_s3_op op);

#define PROF_S3_MAX_STAGES 16
#define PROF_S3_MAX_GROUPS 48
#define PROF_S3_STAGE_MAX  48

/* A named value: one labelled sample, one copy stage's bytes per payload byte
 * ("gw:md5_carry"), or one thread group's CPU-s per payload GiB ("dn:iou-wrk-#"). */
struct prof_s3_named {
	char name[PROF_S3_STAGE_MAX];
	double v;
};

/* What one phase (one op of one mode in one round) measured. */
struct prof_s3_phase {
	double v[PROF_S3_METRICS];
	unsigned n_stages, n_groups;
	struct prof_s3_named stages[PROF_S3_MAX_STAGES];
	/* CPU-s per payload GiB by thread group, names prefixed "gw:" or "dn:" */
	struct prof_s3_named groups[PROF_S3_MAX_GROUPS];
};

/* One mode's and op's medians over rounds, and ratios against the first mode's. */
struct prof_s3_cell {
	double v[PROF_S3_METRICS], ratio[PROF_S3_METRICS];
	unsigned n_stages, n_groups;
	struct prof_s3_named stages[PROF_S3_MAX_STAGES];
	struct prof_s3_named groups[PROF_S3_MAX_GROUPS]; /* largest first */
};

struct prof_s3_summary {
	unsigned n_modes, rounds, concurrent, objects;
	enum prof_mode modes[PROF_MAX_MODES];
	bool ops[PROF_S3_OPS]; /* the phases run (the reports leave the others out) */
	const char *obj_size, *ec, *drives;
	double load1;   /* load average at the end, for the record */
	bool plaintext; /* the gateway-datanode gRPC ran without TLS */
	bool unix_link; /* ... over the datanode's Unix socket (no TLS either) */
	struct prof_s3_cell cell[PROF_MAX_MODES][PROF_S3_OPS];
};

/*
 * Every sample of the series `name` in a /metrics text with a label `label` ("stage"):
 * the label's value and the sample into out (at most max; later ones are dropped). Samples
 * with the same label value add up. Returns the number of entries.
 */
unsigned prof_s3_parse_labelled(const char *text, const char *name, const char *label,
                                struct prof_s3_named *out, unsigned max);

/*
 * Medians over rounds: phases[mode][op][round], n_modes x PROF_S3_OPS x rounds, into
 * s->cell (s->n_modes and s->rounds set by the caller). Ratios are the median over rounds
 * of mode / first mode in the same round (NAN where the first is <= 0, a value is negative or
 * missing);
 * stages and groups seen in any round count 0 in rounds without them.
 */
void prof_s3_summarize(const struct prof_s3_phase *phases, unsigned rounds,
                       struct prof_s3_summary *s);

void prof_s3_report_table(FILE *out, const struct prof_s3_summary *s);

/* {"put":{"copy":{...},"zerocopy":{...},"ratio_zerocopy":{...}},"get":{...},...} and a
 * newline. */
void prof_s3_report_json(FILE *out, const struct prof_s3_summary *s);

/*
 * Bytes of the regular files under dir (recursively) that are resident in the page cache
 * (mincore of a read-only mapping; the mapping reads nothing). Returns bytes, or -errno
 * when dir cannot be read.
 */
int64_t prof_s3_pagecache_bytes(const char *dir);

#endif
