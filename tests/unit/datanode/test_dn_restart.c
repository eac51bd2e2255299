/*
 * A process killed (SIGKILL) in the middle of writes: after restart no partial object is
 * visible and no file of an uncommitted write is left on any drive.
 */
#include <signal.h>
#include <sys/wait.h>

#include "dn_test.h"

static uint8_t buf[300000];

static void
child(struct t_env *e)
{
	struct dn_write *w[3];
	uint8_t other[1000];

	t_open(e);
	CHECK_EQ(dn_bucket_create(e->s, "b", NULL), 0);
	CHECK_EQ(t_put(e->s, "b", "done", buf, sizeof(buf)), 0);
	/* Three writes left half-way: a new key, an overwrite of "done", an unknown size. */
	t_fill(other, sizeof(other));
	CHECK_EQ(t_feed(e->s, "b", "partial", buf, sizeof(buf) / 2, 7000, false, &w[0]), 0);
	CHECK_EQ(t_feed(e->s, "b", "done", other, sizeof(other), 100, true, &w[1]), 0);
	CHECK_EQ(t_feed(e->s, "b", "big", buf, sizeof(buf), 9000, true, &w[2]), 0);
	usleep(200000); /* let the rings write what they have */
	raise(SIGKILL);
}

int
main(void)
{
	struct t_env e;
	unsigned files_done;
	pid_t pid;
	int st;

	t_fill(buf, sizeof(buf));
	t_env_init(&e, 6, 4, 2);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		child(&e);
		_exit(1);
	}
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	CHECK(t_count_files(&e) > 0);

	t_open(&e);
	CHECK_EQ(t_check_read(e.s, "b", "done", 0, 0, false, buf, sizeof(buf)), 0);
	{
		struct dn_object_info info;
		struct dn_list_result lr;

		CHECK_EQ(dn_stat(e.s, "b", "partial", &info), ZC_E(ZC_NO_KEY));
		CHECK_EQ(dn_stat(e.s, "b", "big", &info), ZC_E(ZC_NO_KEY));
		CHECK_EQ(dn_list(e.s, "b", "", "", 0, "", &lr), 0);
		CHECK_EQ(lr.nentries, 1);
		dn_list_result_fini(&lr);
	}
	files_done = t_count_files(&e);
	/* Only "done"'s cells remain: delete it and the drives are empty. */
	CHECK_EQ(dn_delete(e.s, "b", "done"), 1);
	CHECK_EQ(t_count_files(&e), 0);
	CHECK(files_done > 0);
	/* New writes after the restart do not collide with the crashed ones' ids. */
	CHECK_EQ(t_put(e.s, "b", "after", buf, 1000), 0);
	CHECK_EQ(t_check_read(e.s, "b", "after", 0, 0, false, buf, 1000), 0);
	t_env_fini(&e);
	printf("ok\n");
	return 0;
}
