/*
 * test_log_threads.c: the logger (src/config/log.c) used from several threads at once, as
 * several event loops will: every line arrives whole while another thread reconfigures the
 * logger and reopens its file (log rotation), and a line logged while a thread publishes one
 * to the topic sink is not published again, on that thread only. Meant to run under
 * ThreadSanitizer too (make test-tsan), which reports any unlocked access.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "log.h"

#define WRITERS 4
#define LINES_PER_WRITER 3000

#define ROUNDS 50

static char log_path[256];

static void rotated_path(char *out, size_t len, int round)
{
    snprintf(out, len, "%s.%d", log_path, round);
}

static void *write_lines(void *arg)
{
    long writer = (long)arg;
    for (int i = 0; i < LINES_PER_WRITER; i++)
        log_notice("writer %ld line %d end", writer, i);
    return NULL;
}

/* Counts the lines of path that look whole ("<stamp>: writer W line N end"); fails on any
 * other line (a torn or interleaved one). */
static long count_whole_lines(const char *path, long seen[WRITERS])
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[512];
    long count = 0;
    while (fgets(line, sizeof line, f)) {
        long stamp, writer;
        int number;
        char end[8];
        int fields = sscanf(line, "%ld: writer %ld line %d %7s", &stamp, &writer, &number, end);
        if (fields != 4 || strcmp(end, "end") != 0 || writer < 0 || writer >= WRITERS) {
            if (strstr(line, "writer")) fail_msg("torn line: %s", line);
            continue; /* the test's own lines */
        }
        seen[writer]++;
        count++;
    }
    fclose(f);
    return count;
}

static void configure(struct arbor_config *cfg)
{
    config_init_defaults(cfg);
    cfg->log_dest = ARBOR_LOG_DEST_FILE;
    cfg->log_type = ARBOR_LOG_ERROR | ARBOR_LOG_WARNING | ARBOR_LOG_NOTICE;
    free(cfg->log_file);
    cfg->log_file = strdup(log_path);
}

static void test_lines_stay_whole_while_the_file_is_rotated_and_reconfigured(void **state)
{
    (void)state;
    snprintf(log_path, sizeof log_path, "/tmp/arbor-test-log-%ld.log", (long)getpid());
    unlink(log_path);
    struct arbor_config cfg;
    configure(&cfg);
    assert_int_equal(log_configure(&cfg), 0);

    pthread_t writers[WRITERS];
    for (long w = 0; w < WRITERS; w++)
        assert_int_equal(pthread_create(&writers[w], NULL, write_lines, (void *)w), 0);
    char old[320];
    for (int round = 0; round < ROUNDS; round++) {
        if (round % 2 == 0) { /* logrotate: move the file away, then SIGHUP */
            rotated_path(old, sizeof old, round);
            rename(log_path, old);
            log_reopen();
        } else { /* a reload with the same settings */
            log_reconfigure(&cfg);
        }
        usleep(200);
    }
    for (int w = 0; w < WRITERS; w++)
        pthread_join(writers[w], NULL);
    log_close();

    /* every line once, whole, in the live file or one of the rotated ones */
    long seen[WRITERS] = {0};
    long total = count_whole_lines(log_path, seen);
    unlink(log_path);
    for (int round = 0; round < ROUNDS; round += 2) {
        rotated_path(old, sizeof old, round);
        total += count_whole_lines(old, seen);
        unlink(old);
    }
    assert_int_equal(total, (long)WRITERS * LINES_PER_WRITER);
    for (int w = 0; w < WRITERS; w++)
        assert_int_equal(seen[w], LINES_PER_WRITER);
    config_free(&cfg);
}

static atomic_int sink_calls;

static void sink_that_logs(void *ctx, unsigned type, const char *line, size_t length)
{
    (void)ctx;
    (void)type;
    (void)line;
    (void)length;
    atomic_fetch_add(&sink_calls, 1);
    log_notice("logged while publishing"); /* must not come back here */
}

static void *log_through_sink(void *arg)
{
    (void)arg;
    for (int i = 0; i < 500; i++)
        log_notice("to the topic %d", i);
    return NULL;
}

static void test_a_line_logged_by_the_sink_is_not_published_on_any_thread(void **state)
{
    (void)state;
    struct arbor_config cfg;
    config_init_defaults(&cfg);
    cfg.log_dest = ARBOR_LOG_DEST_TOPIC;
    cfg.log_type = ARBOR_LOG_NOTICE;
    assert_int_equal(log_configure(&cfg), 0);
    log_set_topic_sink(sink_that_logs, NULL);
    atomic_store(&sink_calls, 0);
    pthread_t threads[WRITERS];
    for (int t = 0; t < WRITERS; t++)
        assert_int_equal(pthread_create(&threads[t], NULL, log_through_sink, NULL), 0);
    for (int t = 0; t < WRITERS; t++)
        pthread_join(threads[t], NULL);
    /* each thread's 500 lines once; the sink's own lines never */
    assert_int_equal(atomic_load(&sink_calls), WRITERS * 500);
    log_set_topic_sink(NULL, NULL);
    log_close();
    config_free(&cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lines_stay_whole_while_the_file_is_rotated_and_reconfigured),
        cmocka_unit_test(test_a_line_logged_by_the_sink_is_not_published_on_any_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
