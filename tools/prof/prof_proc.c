/* Process, /proc and tiny-HTTP helpers for zest-prof. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "prof_proc.h"

static pid_t
spawn(char *const *argv, const char *log, int out_fd)
{
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);

		if (fd >= 0) {
			dup2(out_fd >= 0 ? out_fd : fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
		}
		setpgid(0, 0);
		execv(argv[0], argv);
		fprintf(stderr, "zest-prof: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	return pid;
}

pid_t
prof_spawn(char *const *argv, const char *log)
{
	return spawn(argv, log, -1);
}

int
prof_run_capture(char *const *argv, char *out, size_t n, const char *log)
{
	int p[2], status;
	size_t got = 0;
	pid_t pid;

	if (pipe(p) < 0)
		return -errno;
	pid = spawn(argv, log, p[1]);
	close(p[1]);
	if (pid < 0) {
		close(p[0]);
		return pid;
	}
	for (;;) {
		char scratch[4096];
		/* Past n, keep draining so the child never blocks on a full pipe. */
		ssize_t r = got < n - 1 ? read(p[0], out + got, n - 1 - got)
		                        : read(p[0], scratch, sizeof(scratch));

		if (r <= 0)
			break;
		if (got < n - 1)
			got += (size_t)r;
	}
	out[got] = 0;
	close(p[0]);
	if (waitpid(pid, &status, 0) < 0)
		return -errno;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int
prof_stop(pid_t pid, unsigned timeout_ms)
{
	int status;

	kill(pid, SIGTERM);
	for (unsigned t = 0; t < timeout_ms; t += 20) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		usleep(20000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return -1;
}

double
prof_cpu_seconds(pid_t pid)
{
	char path[64], buf[2048], *p;
	unsigned long long ut, st;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return NAN;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return NAN;
	}
	fclose(f);
	/* Fields after the command name, which may hold spaces: skip to its ')'. */
	p = strrchr(buf, ')');
	if (!p ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return NAN;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

double
prof_peak_rss_mib(pid_t pid)
{
	char path[64], line[256];
	double kib = NAN;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return NAN;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %lf kB", &kib) == 1)
			break;
	fclose(f);
	return kib / 1024.0;
}

int
prof_free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	close(fd);
	return port;
}

int
prof_http_get(int port, const char *path, char *out, size_t n)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
		                 .sin_port = htons((uint16_t)port),
		                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	char req[512];
	size_t got = 0;
	int fd, len;
	char *body;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	len = snprintf(req, sizeof(req),
	               "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
	if (write(fd, req, (size_t)len) != len) {
		close(fd);
		return -EIO;
	}
	for (;;) {
		ssize_t r = read(fd, out + got, n - 1 - got);

		if (r <= 0)
			break;
		got += (size_t)r;
		if (got == n - 1)
			break;
	}
	close(fd);
	out[got] = 0;
	if (strncmp(out, "HTTP/1.", 7) != 0 || strncmp(out + 9, "200", 3) != 0)
		return -EPROTO;
	body = strstr(out, "\r\n\r\n");
	if (!body)
		return -EPROTO;
	body += 4;
	memmove(out, body, strlen(body) + 1);
	return (int)strlen(out);
}

static const char *
next_line(const char *line)
{
	const char *nl = strchr(line, '\n');

	return nl ? nl + 1 : NULL;
}

double
prof_metric_sum(const char *text, const char *name)
{
	size_t nl = strlen(name);
	double sum = 0;
	bool found = false;

	for (const char *line = text; line && *line; line = next_line(line)) {
		const char *v;

		if (strncmp(line, name, nl) != 0 || (line[nl] != ' ' && line[nl] != '{'))
			continue;
		v = line + nl;
		if (*v == '{') {
			v = strchr(v, '}');
			if (!v)
				continue;
			v++;
		}
		sum += strtod(v, NULL);
		found = true;
	}
	return found ? sum : NAN;
}

double
prof_json_number(const char *json, const char *key)
{
	char pat[128];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = strstr(json, pat);
	return p ? strtod(p + strlen(pat), NULL) : NAN;
}

/* Wait until the /metrics endpoint answers, or the process died. */
int
prof_wait_ready(pid_t pid, int metrics_port, unsigned timeout_ms)
{
	char buf[256];

	for (unsigned t = 0; t < timeout_ms; t += 50) {
		char path[64];

		if (prof_http_get(metrics_port, "/metrics", buf, sizeof(buf)) >= 0)
			return 0;
		snprintf(path, sizeof(path), "/proc/%d", (int)pid);
		if (access(path, F_OK) < 0)
			return -ECHILD;
		usleep(50000);
	}
	return -ETIMEDOUT;
}
