/* The daemons' config file: flag names as `name = value` lines, merged before argv. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "zc_conf.h"

static char *
trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r'))
		*--e = 0;
	return s;
}

static const struct option *
find_opt(const struct option *opts, const char *name)
{
	for (; opts->name; opts++)
		if (!strcmp(opts->name, name))
			return opts;
	return NULL;
}

static int
add_owned(struct zc_conf *c, char *s, unsigned lineno, size_t *cap)
{
	if (c->nowned == *cap) {
		size_t n = *cap ? 2 * *cap : 16;
		char **o = realloc(c->owned, n * sizeof(*o));
		unsigned *l;

		if (!o)
			return -ENOMEM;
		c->owned = o;
		l = realloc(c->owned_lines, n * sizeof(*l));
		if (!l)
			return -ENOMEM;
		c->owned_lines = l;
		*cap = n;
	}
	c->owned_lines[c->nowned] = lineno;
	c->owned[c->nowned++] = s;
	return 0;
}

/* One line: nothing to add (blank, comment, `flag = false`), or "--name[=value]" owned. */
static int
parse_line(struct zc_conf *c, char *line, unsigned lineno, const struct option *opts,
           const char *prog, FILE *err, size_t *cap)
{
	char *s = trim(line), *eq, *name, *val, *arg;
	const struct option *o;
	size_t n;

	if (!*s || *s == '#')
		return 0;
	eq = strchr(s, '=');
	if (!eq) {
		fprintf(err, "%s: %s:%u: expected `name = value`, got: %s\n", prog, c->path, lineno,
		        s);
		return -EINVAL;
	}
	*eq = 0;
	name = trim(s);
	val = trim(eq + 1);
	if (!strcmp(name, "help") || !strcmp(name, "version") || !strcmp(name, "config")) {
		fprintf(err, "%s: %s:%u: %s is a command-line flag only, not a setting\n", prog,
		        c->path, lineno, name);
		return -EINVAL;
	}
	o = *name ? find_opt(opts, name) : NULL;
	if (!o) {
		fprintf(err,
		        "%s: %s:%u: unknown setting '%s' (the names are %s's long flags without "
		        "the leading --; see %s --help)\n",
		        prog, c->path, lineno, name, prog, prog);
		return -EINVAL;
	}
	if (o->has_arg == no_argument) {
		if (!strcmp(val, "false"))
			return 0;
		if (strcmp(val, "true")) {
			fprintf(err, "%s: %s:%u: %s is on or off: give true or false, not '%s'\n",
			        prog, c->path, lineno, name, val);
			return -EINVAL;
		}
		val = NULL;
	} else if (!*val) {
		fprintf(err, "%s: %s:%u: %s needs a value\n", prog, c->path, lineno, name);
		return -EINVAL;
	}
	n = strlen(name) + (val ? strlen(val) + 1 : 0) + 3;
	arg = malloc(n);
	if (!arg)
		return -ENOMEM;
	snprintf(arg, n, val ? "--%s=%s" : "--%s", name, val);
	if (add_owned(c, arg, lineno, cap)) {
		free(arg);
		return -ENOMEM;
	}
	return 0;
}

static int
read_file(struct zc_conf *c, const struct option *opts, const char *prog, FILE *err)
{
	FILE *f = fopen(c->path, "r");
	char *line = NULL;
	size_t len = 0, cap = 0;
	unsigned lineno = 0;
	int rc = 0;

	if (!f) {
		rc = -errno;
		fprintf(err, "%s: cannot read config %s: %s\n", prog, c->path, strerror(-rc));
		return rc;
	}
	while (getline(&line, &len, f) >= 0) {
		lineno++;
		rc = parse_line(c, line, lineno, opts, prog, err, &cap);
		if (rc < 0)
			break;
	}
	if (!rc && ferror(f)) {
		rc = -EIO;
		fprintf(err, "%s: cannot read config %s: %s\n", prog, c->path, strerror(EIO));
	}
	free(line);
	fclose(f);
	return rc;
}

int
zc_conf_load(struct zc_conf *c, int argc, char **argv, int keep, const struct option *opts,
             const char *prog, FILE *err)
{
	int cfg_at = -1, cfg_n = 0, rc, n;

	memset(c, 0, sizeof(*c));
	for (int i = keep; i < argc && strcmp(argv[i], "--"); i++) {
		const char *path = NULL;
		int used = 1;

		if (!strcmp(argv[i], "--config")) {
			if (i + 1 >= argc) {
				fprintf(err, "%s: --config needs a FILE\n", prog);
				return -EINVAL;
			}
			path = argv[i + 1];
			used = 2;
		} else if (!strncmp(argv[i], "--config=", 9)) {
			path = argv[i] + 9;
		}
		if (!path)
			continue;
		if (c->path) {
			fprintf(err, "%s: --config is given twice\n", prog);
			return -EINVAL;
		}
		c->path = path;
		cfg_at = i;
		cfg_n = used;
		i += used - 1;
	}
	if (c->path) {
		rc = read_file(c, opts, prog, err);
		if (rc < 0) {
			zc_conf_fini(c);
			return rc;
		}
	}
	c->argv = calloc((size_t)argc + c->nowned + 1, sizeof(*c->argv));
	c->lines = calloc((size_t)argc + c->nowned + 1, sizeof(*c->lines));
	if (!c->argv || !c->lines) {
		zc_conf_fini(c);
		return -ENOMEM;
	}
	n = 0;
	for (int i = 0; i < keep && i < argc; i++)
		c->argv[n++] = argv[i];
	for (unsigned i = 0; i < c->nowned; i++) {
		c->lines[n] = c->owned_lines[i];
		c->argv[n++] = c->owned[i];
	}
	for (int i = keep; i < argc; i++)
		if (i < cfg_at || i >= cfg_at + cfg_n)
			c->argv[n++] = argv[i];
	c->argc = n;
	return 0;
}

const char *
zc_conf_where(struct zc_conf *c, int argi)
{
	if (!c->lines || argi < 0 || argi >= c->argc || !c->lines[argi])
		return "";
	snprintf(c->at, sizeof(c->at), "%s:%u: ", c->path, c->lines[argi]);
	return c->at;
}

void
zc_conf_fini(struct zc_conf *c)
{
	for (unsigned i = 0; i < c->nowned; i++)
		free(c->owned[i]);
	free(c->owned);
	free(c->owned_lines);
	free(c->argv);
	free(c->lines);
	memset(c, 0, sizeof(*c));
}
