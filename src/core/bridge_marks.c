/*
 * bridge_marks.c: bridge names as small numbers (bridge_marks.h).
 */
#include "bridge_marks.h"

#include <stdlib.h>
#include <string.h>

uint32_t bridge_marks_intern(struct bridge_marks *marks, const char *name, size_t len)
{
    for (uint32_t i = 0; i < marks->count; i++)
        if (strlen(marks->names[i]) == len && memcmp(marks->names[i], name, len) == 0)
            return i + 1;
    if (marks->count == BRIDGE_MARKS_MAX) return 0;
    if (marks->count == marks->cap) {
        uint32_t cap = marks->cap ? marks->cap * 2 : 8;
        char **names = realloc(marks->names, cap * sizeof *names);
        if (!names) return 0;
        marks->names = names;
        marks->cap = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy) return 0;
    memcpy(copy, name, len);
    copy[len] = '\0';
    marks->names[marks->count++] = copy;
    return marks->count;
}

const char *bridge_marks_name(const struct bridge_marks *marks, uint32_t mark)
{
    return mark && mark <= marks->count ? marks->names[mark - 1] : NULL;
}

void bridge_marks_free(struct bridge_marks *marks)
{
    for (uint32_t i = 0; i < marks->count; i++) free(marks->names[i]);
    free(marks->names);
    memset(marks, 0, sizeof *marks);
}
