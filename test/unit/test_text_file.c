/*
 * test_text_file.c: whole-file reads (limits, NUL bytes, missing files) and the line walk
 * (numbering, CR, blanks and comments, early stop) of src/config/text_file.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "text_file.h"

static char *write_temp(const void *data, size_t len)
{
    static char path[64];
    snprintf(path, sizeof path, "/tmp/arbor-text-file-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    close(fd);
    return path;
}

static void test_reads_whole_file_of_any_size(void **state)
{
    (void)state;
    size_t sizes[] = {0, 1, 4094, 4095, 4096, 100000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char *data = malloc(sizes[i] + 1);
        for (size_t j = 0; j < sizes[i]; j++)
            data[j] = (char)('a' + j % 26);
        char *path = write_temp(data, sizes[i]);
        for (unsigned flags = 0; flags <= TEXT_FILE_SECRET; flags++) {
            char *text;
            size_t len;
            assert_int_equal(text_file_read(path, 1 << 20, flags, &text, &len), TEXT_FILE_OK);
            assert_int_equal(len, sizes[i]);
            assert_memory_equal(text, data, sizes[i]);
            assert_int_equal(text[len], '\0');
            text_file_free(text, len, flags);
        }
        unlink(path);
        free(data);
    }
}

static void test_refusals(void **state)
{
    (void)state;
    char *text = (char *)1;
    size_t len = 7;
    assert_int_equal(text_file_read("/nonexistent/arbor", 100, 0, &text, &len),
                     TEXT_FILE_CANNOT_OPEN);
    assert_int_equal(errno, ENOENT);
    assert_null(text);
    assert_int_equal(len, 0);
    char why[128];
    text_file_describe(TEXT_FILE_CANNOT_OPEN, why, sizeof why);
    assert_string_equal(why, "cannot open: No such file or directory");

    assert_int_equal(text_file_read("/tmp", 100, 0, &text, &len), TEXT_FILE_CANNOT_READ);
    assert_int_equal(errno, EISDIR);

    char big[5000];
    memset(big, 'x', sizeof big);
    char *path = write_temp(big, sizeof big);
    assert_int_equal(text_file_read(path, 4999, TEXT_FILE_SECRET, &text, &len),
                     TEXT_FILE_TOO_LARGE);
    assert_int_equal(text_file_read(path, 5000, 0, &text, &len), TEXT_FILE_OK);
    text_file_free(text, len, 0);
    unlink(path);

    path = write_temp("a\0b\n", 4);
    assert_int_equal(text_file_read(path, 100, 0, &text, &len), TEXT_FILE_NUL_BYTE);
    assert_int_equal(text_file_read(path, 100, TEXT_FILE_NUL_OK, &text, &len), TEXT_FILE_OK);
    assert_int_equal(len, 4);
    text_file_free(text, len, 0);
    unlink(path);
}

struct seen {
    int numbers[16];
    char lines[16][32];
    int count;
    int stop_at;
};

static int collect(char *line, int number, void *ctx)
{
    struct seen *seen = ctx;
    if (seen->count == seen->stop_at) return 42;
    seen->numbers[seen->count] = number;
    snprintf(seen->lines[seen->count], sizeof seen->lines[0], "%s", line);
    seen->count++;
    return 0;
}

static void test_line_walk(void **state)
{
    (void)state;
    char text[] = "first\r\n\n  # comment\n\t\nsecond:x \n#also\nlast";
    struct seen seen = {.stop_at = -1};
    assert_int_equal(text_each_line(text, collect, &seen), 0);
    assert_int_equal(seen.count, 3);
    assert_int_equal(seen.numbers[0], 1);
    assert_string_equal(seen.lines[0], "first");
    assert_int_equal(seen.numbers[1], 5);
    assert_string_equal(seen.lines[1], "second:x ");
    assert_int_equal(seen.numbers[2], 7);
    assert_string_equal(seen.lines[2], "last");

    char again[] = "a\nb\nc\n";
    struct seen stop = {.stop_at = 1};
    assert_int_equal(text_each_line(again, collect, &stop), 42);
    assert_int_equal(stop.count, 1);

    char empty[] = "";
    struct seen none = {.stop_at = -1};
    assert_int_equal(text_each_line(empty, collect, &none), 0);
    assert_int_equal(none.count, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_whole_file_of_any_size),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_line_walk),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
