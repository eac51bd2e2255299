/* common/zc_conf: the config file merged before the command line, and its refusals. */
#include <errno.h>
#include <getopt.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "zc_conf.h"

static const struct option opts[] = {
	{ "listen", required_argument, NULL, 'l' }, { "drive", required_argument, NULL, 'd' },
	{ "insecure", no_argument, NULL, 'i' },     { "discard", no_argument, NULL, 'x' },
	{ "help", no_argument, NULL, 'h' },         { NULL, 0, NULL, 0 },
};

static char path[64];
static char errbuf[1024];

static void
write_conf(const char *text)
{
	int fd;

	strcpy(path, "/tmp/test_zc_conf.XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

/* zc_conf_load on argv (NULL-terminated), errors into errbuf */
static int
load(struct zc_conf *c, char **argv, int keep)
{
	FILE *err = fmemopen(errbuf, sizeof(errbuf), "w");
	int argc = 0, rc;

	while (argv[argc])
		argc++;
	memset(errbuf, 0, sizeof(errbuf));
	rc = zc_conf_load(c, argc, argv, keep, opts, "prog", err);
	fclose(err);
	return rc;
}

static void
test_no_file(void **state)
{
	char *argv[] = { "prog", "--listen", "a:1", NULL };
	struct zc_conf c;

	(void)state;
	assert_int_equal(load(&c, argv, 1), 0);
	assert_null(c.path);
	assert_int_equal(c.argc, 3);
	assert_string_equal(c.argv[1], "--listen");
	assert_string_equal(c.argv[2], "a:1");
	assert_null(c.argv[3]);
	assert_string_equal(zc_conf_where(&c, 1), "");
	zc_conf_fini(&c);
	zc_conf_fini(&c); /* twice: a no-op */
}

static void
test_merge_order(void **state)
{
	struct zc_conf c;
	int opt;
	const char *listen = NULL;
	unsigned drives = 0;
	int insecure = 0, discard = 0;

	(void)state;
	write_conf("# a datanode\n"
	           "\n"
	           "listen = 127.0.0.1:7070\n"
	           "  drive=/srv/d0  \n"
	           "drive = /srv/d 1\n"
	           "\tinsecure = true\n"
	           "discard = false\n");
	char *argv[] = { "prog", "heal", "--config", path, "--listen", "10.0.0.1:1", NULL };
	assert_int_equal(load(&c, argv, 2), 0);
	assert_string_equal(c.path, path);
	/* argv[0], the kept subcommand, the file's flags, then the command line's */
	assert_int_equal(c.argc, 8);
	assert_string_equal(c.argv[1], "heal");
	assert_string_equal(c.argv[2], "--listen=127.0.0.1:7070");
	assert_string_equal(c.argv[3], "--drive=/srv/d0");
	assert_string_equal(c.argv[4], "--drive=/srv/d 1");
	assert_string_equal(c.argv[5], "--insecure");
	assert_string_equal(c.argv[6], "--listen");
	assert_string_equal(c.argv[7], "10.0.0.1:1");
	assert_null(c.argv[8]);
	char want[128];
	snprintf(want, sizeof(want), "%s:5: ", path);
	assert_string_equal(zc_conf_where(&c, 4), want);
	snprintf(want, sizeof(want), "%s:6: ", path);
	assert_string_equal(zc_conf_where(&c, 5), want);
	assert_string_equal(zc_conf_where(&c, 6), "");
	assert_string_equal(zc_conf_where(&c, 99), "");

	/* one getopt pass over the merged list: the command line's --listen wins */
	optind = 2;
	opterr = 0;
	while ((opt = getopt_long(c.argc, c.argv, "", opts, NULL)) != -1) {
		if (opt == 'l')
			listen = optarg;
		else if (opt == 'd')
			drives++;
		else if (opt == 'i')
			insecure = 1;
		else if (opt == 'x')
			discard = 1;
		else
			fail();
	}
	assert_string_equal(listen, "10.0.0.1:1");
	assert_int_equal(drives, 2);
	assert_int_equal(insecure, 1);
	assert_int_equal(discard, 0);
	zc_conf_fini(&c);
	unlink(path);
}

static void
test_config_equals(void **state)
{
	struct zc_conf c;
	char arg[96];

	(void)state;
	write_conf("listen = x:1"); /* no final newline */
	snprintf(arg, sizeof(arg), "--config=%s", path);
	char *argv[] = { "prog", "--insecure", arg, NULL };
	assert_int_equal(load(&c, argv, 1), 0);
	assert_int_equal(c.argc, 3);
	assert_string_equal(c.argv[1], "--listen=x:1");
	assert_string_equal(c.argv[2], "--insecure");
	zc_conf_fini(&c);
	unlink(path);
}

/* each bad file: refused, with "prog: FILE:LINE: " and the reason */
static void
test_refusals(void **state)
{
	static const struct {
		const char *text;
		unsigned line;
		const char *why;
	} bad[] = {
		{ "listen = a:1\nlisten: a:2\n", 2, "expected `name = value`" },
		{ "# x\nlisen = a:1\n", 2, "unknown setting 'lisen'" },
		{ "--listen = a:1\n", 1, "unknown setting '--listen'" },
		{ "= a:1\n", 1, "unknown setting ''" },
		{ "insecure = yes\n", 1, "insecure is on or off: give true or false, not 'yes'" },
		{ "insecure =\n", 1, "insecure is on or off" },
		{ "\n\nlisten =   \n", 3, "listen needs a value" },
		{ "help = true\n", 1, "help is a command-line flag only" },
		{ "config = /etc/x\n", 1, "config is a command-line flag only" },
	};
	char want[160];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct zc_conf c;

		write_conf(bad[i].text);
		char *argv[] = { "prog", "--config", path, NULL };
		assert_int_equal(load(&c, argv, 1), -EINVAL);
		snprintf(want, sizeof(want), "prog: %s:%u: %s", path, bad[i].line, bad[i].why);
		if (strncmp(errbuf, want, strlen(want)))
			fail_msg("case %zu: got '%s', want '%s...'", i, errbuf, want);
		assert_null(c.argv);
		zc_conf_fini(&c);
		unlink(path);
	}
}

static void
test_bad_command_lines(void **state)
{
	struct zc_conf c;

	(void)state;
	char *missing[] = { "prog", "--config", "/nonexistent/zest.conf", NULL };
	assert_int_equal(load(&c, missing, 1), -ENOENT);
	assert_non_null(strstr(errbuf, "cannot read config /nonexistent/zest.conf"));

	char *noval[] = { "prog", "--config", NULL };
	assert_int_equal(load(&c, noval, 1), -EINVAL);
	assert_non_null(strstr(errbuf, "--config needs a FILE"));

	write_conf("listen = a:1\n");
	char *twice[] = { "prog", "--config", path, "--config", path, NULL };
	assert_int_equal(load(&c, twice, 1), -EINVAL);
	assert_non_null(strstr(errbuf, "--config is given twice"));

	/* after `--` nothing is a flag */
	char *after[] = { "prog", "--", "--config", path, NULL };
	assert_int_equal(load(&c, after, 1), 0);
	assert_null(c.path);
	assert_int_equal(c.argc, 4);
	zc_conf_fini(&c);
	unlink(path);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_file),           cmocka_unit_test(test_merge_order),
		cmocka_unit_test(test_config_equals),     cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_bad_command_lines),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
