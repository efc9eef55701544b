/* The election's pure parts (see election.h): the deadline arithmetic of
 * docs/design.md, rule 2. No state, no I/O:
 * unit-tested in test_client_status. */
#include "election.h"

#include "kubelease/v1/kubelease.pb-c.h"

int64_t kl__deadline_after_confirm(int64_t sent_ms, int64_t valid_for_ms)
{
    return valid_for_ms > 0 ? sent_ms + valid_for_ms : sent_ms;
}

int64_t kl__next_confirm_at(int64_t sent_ms, int64_t valid_for_ms)
{
    int64_t third = valid_for_ms / 3;
    return sent_ms + (third > 0 ? third : 1);
}

int64_t kl__confirm_retry_at(int64_t sent_ms, int64_t deadline_ms)
{
    return deadline_ms > sent_ms ? sent_ms + (deadline_ms - sent_ms) / 2 : sent_ms;
}

int64_t kl__remaining_ms(int64_t deadline_ms, int64_t now_ms)
{
    return deadline_ms > now_ms ? deadline_ms - now_ms : 0;
}
