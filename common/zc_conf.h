/*
 * zc_conf: the daemons' optional config file (`--config FILE`). The file is a list of the
 * program's own long flags, one `name = value` a line (`name = true` for a flag without a
 * value, `name = false` to leave it off; `#` starts a comment line); it is turned into
 * `--name=value` arguments placed before the command line's, so the program's one flag
 * parser sees defaults, then the file, then the flags, and a later flag wins. Names are
 * checked here against the program's getopt table; values are the parser's to check, and
 * zc_conf_where() tells it which file line an argument came from.
 * Single-threaded: called once at start, before any thread exists.
 */
#ifndef ZEST_ZC_CONF_H
#define ZEST_ZC_CONF_H

#include <getopt.h>
#include <stdio.h>

struct zc_conf {
	const char *path; /* the --config FILE; NULL: no file given */
	int argc;         /* the merged arguments, NULL-terminated */
	char **argv;
	unsigned *lines; /* per merged argument: its line in the file; 0: from the command line */
	char **owned;    /* the "--name=value" strings built from the file */
	unsigned *owned_lines; /* and the line each came from */
	unsigned nowned;
	char at[320]; /* zc_conf_where's "FILE:LINE: " */
};

/*
 * Find `--config FILE` (or `--config=FILE`) in argv (before any `--`), read the file and
 * build the merged arguments: argv[0..keep) (the program name, and a subcommand such as
 * the datanode's `heal`), then the file's flags in file order, then argv's other
 * arguments. Without --config the merged arguments are argv's own. opts is the program's
 * getopt_long table; `help`, `version` and `config` are refused in a file. Returns 0, or
 * -EINVAL / -errno with one line "PROG: FILE:LINE: why" on err (an unknown name, a line
 * without `=`, a flag without a value given one other than true/false, an empty value, a
 * file that cannot be read). The merged strings live until zc_conf_fini().
 */
int zc_conf_load(struct zc_conf *conf, int argc, char **argv, int keep, const struct option *opts,
                 const char *prog, FILE *err);

/* "FILE:LINE: " when merged argument argi came from the file, else "". The string lives
 * until the next call. */
const char *zc_conf_where(struct zc_conf *conf, int argi);

/* Free the merged arguments; a zeroed or finished conf is a no-op. */
void zc_conf_fini(struct zc_conf *conf);

#endif
