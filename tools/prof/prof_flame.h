/*
 * zest-prof's flame graphs: fold `perf script` output into stacks and draw them as SVG.
 *
 * A struct prof_flame is a multiset of call stacks, each a string of frames from the root
 * to the leaf joined by ';' (the "folded" format of Brendan Gregg's stackcollapse-perf.pl,
 * which every other flame graph tool reads). The first frame is the thread's command name;
 * kernel frames end in "_[k]". prof_flame_write_svg() draws the same picture as
 * flamegraph.pl: one rectangle per frame, width proportional to samples, siblings ordered
 * alphabetically, a <title> tooltip with samples and percent, names truncated to fit.
 * Self-contained: no Perl, no FlameGraph scripts.
 *
 * Threading: a prof_flame belongs to one thread; nothing here is shared.
 */
#ifndef ZEST_PROF_FLAME_H
#define ZEST_PROF_FLAME_H

#include <stdint.h>
#include <stdio.h>

struct prof_flame;

/* A new, empty set of stacks. Returns 0 or -ENOMEM. */
int prof_flame_create(struct prof_flame **out);

/* Frees the set and every stack in it. NULL is a no-op. */
void prof_flame_destroy(struct prof_flame *f);

/* Adds count samples of one folded stack ("comm;a;b;c", root first). The string is copied.
 * Returns 0, -EINVAL on an empty stack or zero count, -ENOMEM. */
int prof_flame_add(struct prof_flame *f, const char *stack, uint64_t count);

/* Folds `perf script` text (its default output, with call chains from -g or --call-graph)
 * read from in: one stack per sample, each sample counted once. Offsets are dropped,
 * "[unknown]" frames become "[dso basename]", kernel frames get "_[k]". Returns the number
 * of samples read, or -errno (-ENOMEM; -EIO on a read error). */
long prof_flame_read_perf(struct prof_flame *f, FILE *in);

/* Runs `perf script -i perf_data` and folds its output as prof_flame_read_perf() does.
 * Returns the number of samples, or -errno (-ENOENT when perf could not run or failed). */
long prof_flame_read_perf_data(struct prof_flame *f, const char *perf_data);

/* Samples added so far. */
uint64_t prof_flame_samples(const struct prof_flame *f);

/* Share (0..1) of the samples with at least one user-space frame (not "_[k]") whose name
 * contains any of the NULL-terminated needles; 0 when there are no samples. */
double prof_flame_share(const struct prof_flame *f, const char *const *needles);

/* Writes "stack count" lines, sorted by stack. Returns 0 or -errno. */
int prof_flame_write_folded(const struct prof_flame *f, FILE *out);

/* Writes the SVG flame graph (width_px wide: 0 for the default 1200, else 100..100000;
 * -EINVAL otherwise) titled title (NULL: "Flame Graph").
 * Frames whose name contains one of the NULL-terminated highlight needles (may be NULL) in
 * user space are drawn in blue, kernel frames in orange, the rest in warm colours. An empty
 * set draws the title and an empty graph. Returns 0 or -errno. */
int prof_flame_write_svg(const struct prof_flame *f, FILE *out, const char *title,
                         unsigned width_px, const char *const *highlight);

#endif
