/*
 * test_sys_stats.c: $SYS counters over several loops (src/core/sys_tree.c): the loop that
 * publishes adds its own counters as they are to the others' as they last shared them (each
 * loop shares at its tick), every field; clients/maximum is the most clients at once over all
 * loops, not the sum of each loop's maximum.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "broker_shared.h"
#include "sys_tree.h"

struct fixture {
    struct broker_shared shared;
    struct broker a, b;
};

static struct fixture *two_loops(void)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    for (unsigned i = 0; i < 2; i++)
        pthread_mutex_init(&f->shared.loop_stats[i].lock, NULL);
    f->a.shared = f->b.shared = &f->shared;
    f->b.loop_index = 1;
    f->shared.loops[0] = &f->a;
    f->shared.loops[1] = &f->b;
    f->shared.loop_count = 2;
    return f;
}

static void test_counters_add_up_over_loops(void **state)
{
    (void)state;
    struct fixture *f = two_loops();
    f->a.stats.publish_received = 10;
    f->a.stats.subscribers_cut_loose = 1; /* the last field */
    f->b.stats.publish_received = 5;
    f->b.stats.messages_received = 7; /* the first field */
    struct broker_stats sum;
    sys_tree_sum_stats(&f->a, &sum);
    assert_int_equal(sum.publish_received, 10); /* b has not shared yet */
    sys_tree_share_stats(&f->b);
    f->b.stats.publish_received = 1000; /* after sharing: not seen until the next share */
    sys_tree_sum_stats(&f->a, &sum);
    assert_int_equal(sum.publish_received, 15);
    assert_int_equal(sum.messages_received, 7);
    assert_int_equal(sum.subscribers_cut_loose, 1);
    /* every field of b's is added: b shares all ones */
    memset(&f->b.stats, 0, sizeof f->b.stats);
    uint64_t *fields = (uint64_t *)&f->b.stats;
    for (size_t i = 0; i < sizeof f->b.stats / sizeof(uint64_t); i++)
        fields[i] = 1;
    sys_tree_share_stats(&f->b);
    memset(&f->a.stats, 0, sizeof f->a.stats);
    sys_tree_sum_stats(&f->a, &sum);
    const uint64_t *summed = (const uint64_t *)&sum;
    for (size_t i = 0; i < sizeof sum / sizeof(uint64_t); i++)
        assert_int_equal(summed[i], 1);
    free(f);
}

static void test_clients_maximum_is_the_most_at_once(void **state)
{
    (void)state;
    struct fixture *f = two_loops();
    sys_tree_client_connected(&f->a);
    sys_tree_client_connected(&f->b);
    sys_tree_client_gone(&f->a);
    sys_tree_client_connected(&f->a);
    sys_tree_client_connected(&f->b); /* 3 at once */
    sys_tree_client_gone(&f->b);
    sys_tree_client_gone(&f->b);
    sys_tree_client_connected(&f->a); /* 2 */
    assert_int_equal(atomic_load(&f->shared.sys.clients_active), 2);
    assert_int_equal(atomic_load(&f->shared.sys.clients_maximum), 3);
    free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counters_add_up_over_loops),
        cmocka_unit_test(test_clients_maximum_is_the_most_at_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
