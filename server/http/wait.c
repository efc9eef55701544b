/* The one way a request waits (wait.h). */
#include "http/wait.h"

#include "http/internal.h"

void http_wait_init(http_wait *w, http_server *s, struct MHD_Connection *conn,
                    http_wait_release_fn release)
{
    w->srv = s;
    w->refs = 1;
    w->conn = conn;
    w->suspended = false;
    w->done = false;
    kl__list_init(&w->link);
    w->release = release;
}

void http_wait_ref(http_wait *w)
{
    w->refs++;
}

void http_wait_unref(http_wait *w)
{
    if (--w->refs > 0)
        return;
    w->release(w);
}

void http_wait_list(struct kl__list *list, http_wait *w)
{
    kl__list_insert_head(list, &w->link);
}

void http_wait_unlist(http_wait *w)
{
    kl__list_remove(&w->link);
}

http_wait *http_wait_of(struct kl__list *link)
{
    return KL__LIST_ENTRY(link, http_wait, link);
}

void http_wait_park(http_wait *w)
{
    if (!w->conn || w->suspended)
        return;
    w->suspended = true;
    MHD_suspend_connection(w->conn);
}

void http_wait_resume(http_wait *w)
{
    if (w->suspended && w->conn) {
        w->suspended = false;
        MHD_resume_connection(w->conn);
    }
}

bool http_wait_complete(http_wait *w)
{
    if (w->done)
        return false;
    w->done = true;
    http_wait_resume(w);
    return true;
}

bool http_wait_resumed(http_wait *w, http_wait_fail_fn fail)
{
    if (!w->done && w->srv->gone)
        fail(w, RPC_UNAVAILABLE, HTTP_SHUTTING_DOWN);
    if (w->done)
        return true;
    http_wait_park(w);
    return false;
}

void http_wait_request_done(http_wait *w)
{
    w->conn = NULL;
    w->suspended = false;
    http_wait_unref(w); /* the request's */
}

void http_waits_end(struct kl__list *list, http_wait_fail_fn fail)
{
    while (!kl__list_empty(list)) {
        http_wait *w = http_wait_of(kl__list_first(list));
        http_wait_unlist(w);
        fail(w, RPC_UNAVAILABLE, HTTP_SHUTTING_DOWN);
        http_wait_unref(w); /* the answerer's: it will never answer */
    }
}

void http_waits_fail(struct kl__list *list, http_wait_fail_fn fail)
{
    KL__LIST_FOREACH (link, list)
        fail(http_wait_of(link), RPC_UNAVAILABLE, HTTP_SHUTTING_DOWN);
}
