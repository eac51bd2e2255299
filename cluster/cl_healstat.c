/* cl_healstat: a healer's progress value and its rates (cl_healstat.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cl_healstat.h"

int
cl_healstat_format(const struct cl_healstat *s, char *buf, size_t cap)
{
	int n = snprintf(buf, cap,
	                 "v=1 t_ms=%" PRIu64 " passes=%" PRIu64 " pending_cells=%" PRIu64
	                 " pending_bytes=%" PRIu64 " healed_cells=%" PRIu64 " healed_bytes=%" PRIu64
	                 " prev_t_ms=%" PRIu64 " prev_healed_cells=%" PRIu64
	                 " prev_healed_bytes=%" PRIu64 " own_cells=%" PRId64 " own_bytes=%" PRId64
	                 " own_t_ms=%" PRIu64 " prev_own_cells=%" PRId64 " prev_own_t_ms=%" PRIu64
	                 " own_drain_s=%" PRId64,
	                 s->t_ms, s->passes, s->pending_cells, s->pending_bytes, s->healed_cells,
	                 s->healed_bytes, s->prev_t_ms, s->prev_healed_cells, s->prev_healed_bytes,
	                 s->own_cells, s->own_bytes, s->own_t_ms, s->prev_own_cells,
	                 s->prev_own_t_ms, s->own_drain_s);

	return n < 0 || (size_t)n >= cap ? -ENOSPC : n;
}

/* A decimal number, optionally negative, in v[0..len): 0 and *out, else -EINVAL. */
static int
parse_num(const char *v, size_t len, bool neg_ok, int64_t *out)
{
	bool neg = false;
	uint64_t x = 0;
	size_t i = 0;

	if (len && v[0] == '-' && neg_ok) {
		neg = true;
		i = 1;
	}
	if (i == len || len - i > 18)
		return -EINVAL;
	for (; i < len; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -EINVAL;
		x = x * 10 + (uint64_t)(v[i] - '0');
	}
	*out = neg ? -(int64_t)x : (int64_t)x;
	return 0;
}

int
cl_healstat_parse(const char *val, size_t len, struct cl_healstat *s)
{
	static const struct {
		const char *name;
		size_t off;
		bool is_signed;
	} fields[] = {
#define F(n, sg) { #n, offsetof(struct cl_healstat, n), sg }
		F(t_ms, false),
		F(passes, false),
		F(pending_cells, false),
		F(pending_bytes, false),
		F(healed_cells, false),
		F(healed_bytes, false),
		F(prev_t_ms, false),
		F(prev_healed_cells, false),
		F(prev_healed_bytes, false),
		F(own_cells, true),
		F(own_bytes, true),
		F(own_t_ms, false),
		F(prev_own_cells, true),
		F(prev_own_t_ms, false),
		F(own_drain_s, false),
#undef F
	};
	bool have_t = false;
	size_t i = 0;

	if (!val)
		return -EINVAL;
	memset(s, 0, sizeof(*s));
	s->own_cells = s->own_bytes = s->prev_own_cells = -1;
	while (i < len) {
		size_t start = i, eq = 0, nl;

		while (i < len && val[i] != ' ')
			i++;
		for (size_t j = start; j < i; j++)
			if (val[j] == '=') {
				eq = j;
				break;
			}
		if (i > start && !eq)
			return -EINVAL;
		nl = eq - start;
		for (size_t f = 0; eq && f < sizeof(fields) / sizeof(fields[0]); f++) {
			int64_t x;

			if (strlen(fields[f].name) != nl || memcmp(fields[f].name, val + start, nl))
				continue;
			if (parse_num(val + eq + 1, i - eq - 1, fields[f].is_signed, &x))
				return -EINVAL;
			/* both kinds are 8 bytes: store the bits */
			memcpy((char *)s + fields[f].off, &x, sizeof(x));
			have_t |= f == 0;
		}
		while (i < len && val[i] == ' ')
			i++;
	}
	return have_t ? 0 : -EINVAL;
}

double
cl_healstat_rate(const struct cl_healstat *s)
{
	if (s->t_ms <= s->prev_t_ms || !s->prev_t_ms || s->healed_cells < s->prev_healed_cells)
		return 0;
	return (double)(s->healed_cells - s->prev_healed_cells) * 1000.0 /
	       (double)(s->t_ms - s->prev_t_ms);
}

double
cl_healstat_own_rate(const struct cl_healstat *s)
{
	if (s->own_cells < 0 || s->prev_own_cells < 0 || s->prev_own_cells <= s->own_cells ||
	    s->own_t_ms <= s->prev_own_t_ms || !s->prev_own_t_ms)
		return 0;
	return (double)(s->prev_own_cells - s->own_cells) * 1000.0 /
	       (double)(s->own_t_ms - s->prev_own_t_ms);
}

int64_t
cl_healstat_eta(uint64_t left, double rate)
{
	if (!left)
		return 0;
	if (rate <= 0)
		return -1;
	return (int64_t)((double)left / rate + 0.999);
}
