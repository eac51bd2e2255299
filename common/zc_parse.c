/* Parsing of sizes and durations given on command lines. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "zc.h"

static const struct {
	const char *unit;
	double scale;
} size_units[] = {
	{ "", 1 },
	{ "b", 1 },
	{ "k", 1024.0 },
	{ "kib", 1024.0 },
	{ "kb", 1e3 },
	{ "m", 1048576.0 },
	{ "mib", 1048576.0 },
	{ "mb", 1e6 },
	{ "g", 1073741824.0 },
	{ "gib", 1073741824.0 },
	{ "gb", 1e9 },
	{ "t", 1099511627776.0 },
	{ "tib", 1099511627776.0 },
	{ "tb", 1e12 },
};

int
zc_parse_size(const char *s, uint64_t *out)
{
	char *end;
	double v;

	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || v < 0 || !isfinite(v))
		return -EINVAL;
	for (size_t i = 0; i < sizeof(size_units) / sizeof(size_units[0]); i++) {
		if (strcasecmp(end, size_units[i].unit) == 0) {
			double bytes = v * size_units[i].scale;

			if (bytes > 1.8e19 || bytes != floor(bytes))
				return -EINVAL;
			*out = (uint64_t)bytes;
			return 0;
		}
	}
	return -EINVAL;
}

int
zc_parse_duration_ns(const char *s, uint64_t *out)
{
	char *end;
	double v, scale;

	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || v < 0 || !isfinite(v))
		return -EINVAL;
	if (!*end || !strcmp(end, "s"))
		scale = 1e9;
	else if (!strcmp(end, "ms"))
		scale = 1e6;
	else if (!strcmp(end, "m"))
		scale = 60e9;
	else if (!strcmp(end, "h"))
		scale = 3600e9;
	else
		return -EINVAL;
	*out = (uint64_t)(v * scale);
	return 0;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double
zc_median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int
zc_parse_uint(const char *s, unsigned max, unsigned *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v > max)
		return -EINVAL;
	*out = (unsigned)v;
	return 0;
}
