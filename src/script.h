/* Lua scripting with wrk's API: one main state (setup, done) and one state
 * per worker thread (init, delay, request, response), each running the
 * script's top level, with the wrk module embedded in the binary.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_SCRIPT_H
#define VOLLEY_SCRIPT_H

#include <stdbool.h>
#include <stddef.h>

struct config;
struct net_addr;
struct proto_response;
struct request;
struct result;

struct script;

/* What a worker thread's script sees of its thread (wrk.thread, the thread
 * userdata of setup()): the address its connections go to, which a script
 * may change, and how to end its run. The worker fills it and owns it. */
struct script_thread {
    struct net_addr *addr;
    /* thread:stop(): end the thread's run early, whether it is running or
     * not started yet (setup()). */
    void (*stop)(void *arg);
    /* An error in a hook on the running thread: it stops, and main reports
     * message once every thread is joined. */
    void (*fail)(void *arg, const char *message);
    /* os.exit(status) on the running thread: it stops, and main ends the
     * run in order, then says message and exits with status. */
    void (*exit)(void *arg, int status, const char *message);
    const bool *running; /* the thread has started (read on that thread) */
    void *arg;
    struct script *script; /* its Lua state, for thread:get and thread:set */
};

/* The main state: loads and runs the script (a load or run error is fatal). */
struct script *script_main_new(const struct config *cfg);
/* A worker's state: the script runs again in it; wrk.thread is the thread,
 * whose script becomes the new state. */
struct script *script_thread_new(const struct config *cfg, struct script_thread *thread);
void script_free(struct script *s);

/* In the main state: wrk.setup(thread), which calls setup(thread). */
void script_setup(struct script *main, struct script_thread *thread);
/* In a worker's state: wrk.init(args), which calls init(args), then builds
 * the static request (the thread's wrk.request()). Sets *r to it. */
void script_init(struct script *s, struct request *r);
/* With a request() hook: call it once, as wrk does before the run, and
 * parse what it returns (exiting with wrk's "<what> at <line>:<col>" when it
 * is malformed, or nil). Returns the number of requests in it: the pipeline
 * depth every request() batch is then read with. */
size_t script_verify(struct script *s);

/* What calling a per-request hook did. The script's globals are looked up
 * on every call, as wrk does, so a hook a script defines, replaces or
 * removes during the run is used (or not) from its next call on. */
enum script_call {
    SCRIPT_NONE,   /* the script does not define the hook (now) */
    SCRIPT_DONE,   /* the hook ran */
    SCRIPT_NIL,    /* request() returned nil: no request to send */
    SCRIPT_FAILED, /* it raised an error: the thread is stopping (its fail()) */
};

/* Whether the thread's script defines request() / delay() now. */
bool script_has_request(struct script *s);
bool script_has_delay(struct script *s);
/* Whether response() was defined at the last call, and whether it declares
 * the headers / body arguments. */
bool script_response_wants(const struct script *s, bool *head, bool *body);

/* request(): the returned bytes replace r->data/r->len (r->depth is kept). */
enum script_call script_request(struct script *s, struct request *r);
/* delay(): milliseconds to wait before the next request, in *ms. */
enum script_call script_delay(struct script *s, double *ms);
/* response(status, headers, body) for the response r just completed. */
enum script_call script_response(struct script *s, const struct proto_response *r);

/* After the report, in the main state: done(summary, latency, requests). */
void script_done(struct script *main, const struct result *r);

#endif
