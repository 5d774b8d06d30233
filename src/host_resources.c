/*
 * host_resources.c: reads this host's /proc/cpuinfo and /proc/meminfo for the MQTT-ST
 * capability. The parsing is stp/capability.c's (pure, tested on sample files); the file
 * system is touched here, in the daemon, so that stp/ stays free of I/O.
 */
#include "host_resources.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_PROC_FILE_BYTES (4u << 20)

/* Reads a whole (small, possibly size-less /proc) file into a NUL-terminated heap buffer. */
static char *read_text_file(const char *path)
{
    FILE *file = fopen(path, "r");
    if (file == NULL) return NULL;
    size_t capacity = 8192, length = 0;
    char *text = malloc(capacity);
    while (text != NULL) {
        length += fread(text + length, 1, capacity - length - 1, file);
        if (length < capacity - 1) break;
        char *bigger = capacity < MAX_PROC_FILE_BYTES ? realloc(text, capacity * 2) : NULL;
        if (bigger == NULL) {
            free(text);
            text = NULL;
            break;
        }
        text = bigger;
        capacity *= 2;
    }
    bool failed = ferror(file) != 0;
    fclose(file);
    if (text == NULL || failed) {
        free(text);
        return NULL;
    }
    text[length] = '\0';
    return text;
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

