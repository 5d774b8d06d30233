/*
 * proc_cpu.h: CPU time of a process from /proc/<pid>/stat (utime + stime, every thread of the
 * process) and of arbor_bench itself (getrusage). Reading only; never signals the process.
 */
#ifndef ARBOR_BENCH_PROC_CPU_H
#define ARBOR_BENCH_PROC_CPU_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* CPU seconds used so far by pid; false if /proc/<pid>/stat cannot be read or parsed. */
bool proc_cpu_seconds(pid_t pid, double *seconds);
/* Sum over several pids; false if any could not be read. */
bool proc_cpu_sum(const pid_t *pids, size_t count, double *seconds);
/* Parse the text of a /proc/<pid>/stat file; exposed for the unit tests. */
bool proc_cpu_parse_stat(const char *text, long ticks_per_second, double *seconds);
/* CPU seconds used so far by this process (all threads). */
double self_cpu_seconds(void);

#endif
