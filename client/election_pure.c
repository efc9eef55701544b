/* The election's pure parts (see election.h): the deadline arithmetic of
 * docs/design.md, rule 2, and what a Lost reason says. No state, no I/O:
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

const char *kl__lost_reason_name(int reason)
{
    switch (reason) {
    case KUBELEASE__V1__LOST_REASON__LOST_REASON_RESIGNED:
        return "resigned";
    case KUBELEASE__V1__LOST_REASON__LOST_REASON_RENEW_FAILED:
        return "the service could not renew the Lease";
    case KUBELEASE__V1__LOST_REASON__LOST_REASON_SUPERSEDED:
        return "another writer changed the Lease";
    case KUBELEASE__V1__LOST_REASON__LOST_REASON_DELETED:
        return "the Lease was deleted";
    case KUBELEASE__V1__LOST_REASON__LOST_REASON_RESUME_FAILED:
        return "the term could not be resumed";
    case KUBELEASE__V1__LOST_REASON__LOST_REASON_SHUTDOWN:
        return "the service is shutting down";
    case KUBELEASE__V1__LOST_REASON__LOST_REASON_EXPIRED:
        return "the campaign expired or was replaced";
    case KUBELEASE__V1__LOST_REASON__LOST_REASON_HANDED_OFF:
        return "handed off";
    default:
        return "unspecified reason";
    }
}
