/*
 * A small SVG scatter chart for zest-bench, written by hand so the benchmark needs no
 * plotting library: one dot per point, per series, and a line through each series' mean
 * per x bin; linear x, linear or log10 y, ticks at round values, a legend.
 *
 * Pure code (no I/O but the FILE * given), no threads; tests/unit/tools/test_bench_adm.c.
 */
#ifndef ZEST_BENCH_SVG_H
#define ZEST_BENCH_SVG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct bench_svg_series {
	const char *label; /* legend text (escaped on output) */
	const char *color; /* an SVG colour: "#1f77b4" */
	const double *x, *y;
	size_t n;
};

struct bench_svg_opts {
	const char *title, *xlabel, *ylabel;
	unsigned width, height; /* pixels; 0: 900 x 500 */
	bool logy;              /* log10 y axis (y <= 0 drawn at the axis floor) */
	double bin;             /* x width of the mean line's bins; 0: no line */
};

/* Writes a whole SVG document. Returns 0, -EINVAL (no series, or a series without points
 * everywhere) or -EIO. */
int bench_svg_chart(FILE *out, const struct bench_svg_opts *o, const struct bench_svg_series *s,
                    unsigned nseries);

/* A "nice" tick step (1, 2 or 5 times a power of ten) giving about `want` ticks over span. */
double bench_svg_step(double span, unsigned want);

#endif
