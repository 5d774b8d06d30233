/*
 * limit_search.c: state machine for the ILDM limit search (see limit_search.h). The caller
 * asks for the next interval, measures, and records pass or fail; nothing here measures.
 */
#include "limit_search.h"

bool limit_run_passes(double ingress, double egress, double sp_ratio, double target_ingress,
                      double threshold, double min_offered)
{
    if (!(ingress > 0) || !(sp_ratio > 0)) return false;
    if (egress / (ingress * sp_ratio) < threshold) return false;
    return !(target_ingress > 0) || ingress >= min_offered * target_ingress;
}

void limit_search_init(struct limit_search *ls, double start_ms, uint32_t splits,
                       uint32_t max_steps, double min_interval_ms)
{
    *ls = (struct limit_search){
        .start_ms = start_ms,
        .min_interval_ms = min_interval_ms,
        .splits = splits < 2 ? 2 : splits,
        .max_steps = max_steps < 1 ? 1 : max_steps,
        .phase = LIMIT_DOUBLING,
        .next_ms = start_ms,
    };
}

bool limit_search_next(const struct limit_search *ls, double *interval_ms)
{
    if (ls->phase == LIMIT_DONE) return false;
    *interval_ms = ls->next_ms;
    return true;
}

double limit_split_point(double pass_ms, uint32_t splits, uint32_t k)
{
    double half = pass_ms / 2;
    return half + k * (half / splits);
}

static void note_pass(struct limit_search *ls, double interval)
{
    if (ls->best_ms == 0 || interval < ls->best_ms) {
        ls->best_ms = interval;
        ls->best_run = ls->runs;
    }
}

static void start_splitting(struct limit_search *ls)
{
    ls->phase = LIMIT_SPLITTING;
    ls->split_k = 1;
    ls->outcome = LIMIT_FOUND;
    ls->next_ms = limit_split_point(ls->pass_ms, ls->splits, 1);
}

static void step_doubling(struct limit_search *ls, double interval, bool passed)
{
    if (passed) {
        ls->pass_ms = interval;
        ls->fail_ms = interval / 2;
        start_splitting(ls);
        return;
    }
    if (ls->steps >= ls->max_steps) {
        ls->phase = LIMIT_DONE;
        ls->outcome = LIMIT_NEVER_PASSED;
        return;
    }
    ls->next_ms = interval * 2;
}

static void step_halving(struct limit_search *ls, double interval, bool passed)
{
    if (!passed) {
        ls->fail_ms = interval;
        start_splitting(ls);
        return;
    }
    ls->pass_ms = interval;
    if (ls->steps >= ls->max_steps || interval / 2 < ls->min_interval_ms) {
        ls->phase = LIMIT_DONE;
        ls->outcome = LIMIT_NEVER_FAILED;
        return;
    }
    ls->next_ms = interval / 2;
}

static void step_splitting(struct limit_search *ls)
{
    if (++ls->split_k >= ls->splits) {
        ls->phase = LIMIT_DONE;
        return;
    }
    ls->next_ms = limit_split_point(ls->pass_ms, ls->splits, ls->split_k);
}

void limit_search_record(struct limit_search *ls, bool passed)
{
    double interval = ls->next_ms;
    if (passed) note_pass(ls, interval);
    if (ls->phase != LIMIT_SPLITTING) ls->steps++;
    /* a passing start interval means the limit lies below it: search downwards */
    if (ls->runs++ == 0 && passed) ls->phase = LIMIT_HALVING;
    switch (ls->phase) {
    case LIMIT_DOUBLING:
        step_doubling(ls, interval, passed);
        break;
    case LIMIT_HALVING:
        step_halving(ls, interval, passed);
        break;
    case LIMIT_SPLITTING:
        step_splitting(ls);
        break;
    case LIMIT_DONE:
        break;
    }
}
