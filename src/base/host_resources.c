/*
 * host_resources.c: reads this host's /proc/cpuinfo and /proc/meminfo for the MQTT-ST
 * capability. The parsing is stp/capability.c's (pure, tested on sample files); the file
 * system is touched here, in the daemon, so that stp/ stays free of I/O.
 */
#include "host_resources.h"

#include <stdlib.h>

#include "text_file.h"

#define MAX_PROC_FILE_BYTES (4u << 20)

/* A whole (small, possibly size-less /proc) file as a NUL-terminated heap string, or NULL. */
static char *read_text_file(const char *path)
{
    char *text;
    size_t len;
    return text_file_read(path, MAX_PROC_FILE_BYTES, 0, &text, &len) == TEXT_FILE_OK ? text : NULL;
}

int host_resources_read(const char *cpuinfo_path, const char *meminfo_path,
                             struct stp_host_resources *out)
{
    char *cpuinfo = read_text_file(cpuinfo_path != NULL ? cpuinfo_path : "/proc/cpuinfo");
    char *meminfo = read_text_file(meminfo_path != NULL ? meminfo_path : "/proc/meminfo");
    int result = -1;
    if (cpuinfo != NULL && meminfo != NULL && stp_capability_parse_cpuinfo(cpuinfo, out) == 0 &&
        stp_capability_parse_meminfo(meminfo, out) == 0)
        result = 0;
    free(cpuinfo);
    free(meminfo);
    return result;
}

