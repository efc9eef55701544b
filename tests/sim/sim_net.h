/* Messages and connections between simulated clients and engines. */
#ifndef KL_TESTS_SIM_NET_H
#define KL_TESTS_SIM_NET_H

#include "sim_internal.h"

typedef enum sim_msg_kind {
    /* client to engine */
    SM_CAMPAIGN,
    SM_CONFIRM,
    SM_RESIGN,
    SM_CHECK_EPOCH,
    SM_HANDOFF,
    SM_PROCLAIM,
    /* engine to client */
    SM_EVENT,      /* a Campaign stream message */
    SM_STREAM_END, /* the engine ended the stream */
    SM_REPLY,      /* a unary answer */
    SM_RESET,      /* the connection broke */
} sim_msg_kind;

typedef struct sim_msg {
    sim_msg_kind kind;
    sim_conn *k;
    uint64_t req_id; /* the client's id of a unary request */
    int lease;
    int64_t epoch;
    int64_t resume_epoch;
    char token[ENGINE_TOKEN_MAX];
    char identity[16];  /* "": the sender's own (c<id>) */
    char pod[32];       /* Campaign: the leader label's Pod ("" none) */
    bool forged;        /* an impostor's request (sim_client_forge) */
    bool by_operator;   /* SM_HANDOFF: someone else's (no identity, no token) */
    char to[16];        /* SM_HANDOFF: the standby to elect ("" next in line) */
    char value[32];     /* SM_CAMPAIGN, SM_PROCLAIM: the leader value */
    int32_t grant_ms;   /* SM_CAMPAIGN: the grant asked for (0: the default) */
    engine_event ev;    /* SM_EVENT */
    engine_reply reply; /* SM_REPLY (no lists) */
} sim_msg;

struct sim_conn {
    uint64_t id;
    sim_client *c;
    unsigned cgen;
    sim_engine *e;
    unsigned egen;
    bool open;
    bool stream;
    uint64_t engine_id;  /* the campaign's id at the engine */
    bool engine_closed;  /* the engine's on_close ran (or it crashed) */
    uint64_t req_id;     /* unary: the client's request */
    sim_msg_kind req;    /* unary: what it asked */
    int64_t epoch_asked; /* CheckEpoch: the epoch asked about */
    bool forged;         /* an impostor's request */
    int64_t asked_at;    /* when the request reached the engine */
    int lease;
    int64_t last_up, last_down;
    sim_conn *next;
};

/* A message with everything before ev zeroed (ev and reply are large and
 * written only by the kinds that carry them); NULL only on exhaustion. */
sim_msg *sim_msg_alloc(void);
sim_conn *sim_conn_open(sim_client *c, sim_engine *e, bool stream);
void sim_conn_send_up(sim_conn *k, sim_msg *m);   /* takes m */
void sim_conn_send_down(sim_conn *k, sim_msg *m); /* takes m */
void sim_conn_reset(sim_conn *k, const char *why);
void sim_conn_close(sim_conn *k);
void sim_net_client_gone(sim_client *c);

/* sim_client.c: the ends */
void sim_engine_serve(sim_conn *k, const sim_msg *m);
void sim_client_receive(sim_client *c, sim_conn *k, const sim_msg *m);

#endif
