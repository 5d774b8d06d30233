/*
 * proc_cpu.c: process CPU time from /proc (see proc_cpu.h).
 */
#include "proc_cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

bool proc_cpu_parse_stat(const char *text, long ticks_per_second, double *seconds)
{
    /* The command name (field 2) is in parentheses and may contain spaces or ')': the
     * fields after it start after the last ')'. utime and stime are fields 14 and 15. */
    const char *p = strrchr(text, ')');
    if (!p || ticks_per_second <= 0) return false;
    p++;
    unsigned long long utime = 0, stime = 0;
    for (int field = 3; field <= 15; field++) {
        while (*p == ' ')
            p++;
        if (*p == '\0') return false;
        char *end;
        unsigned long long v = strtoull(p, &end, 10);
        if (field == 14) utime = v;
        if (field == 15) stime = v;
        p = strchr(p, ' ');
        if (!p && field < 15) return false;
        if (!p) break;
    }
    *seconds = (double)(utime + stime) / (double)ticks_per_second;
    return true;
}

bool proc_cpu_seconds(pid_t pid, double *seconds)
{
    char path[64], text[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    return proc_cpu_parse_stat(text, sysconf(_SC_CLK_TCK), seconds);
}

bool proc_cpu_sum(const pid_t *pids, size_t count, double *seconds)
{
    double total = 0;
    for (size_t i = 0; i < count; i++) {
        double s;
        if (!proc_cpu_seconds(pids[i], &s)) return false;
        total += s;
    }
    *seconds = total;
    return count > 0;
}

double self_cpu_seconds(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}
