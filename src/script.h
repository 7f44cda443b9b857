/* Lua scripting with wrk's API: one main state (setup, done) and one state
 * per worker thread (init, delay, request, response), each running the
 * script's top level, with the wrk module embedded in the binary.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_SCRIPT_H
#define VOLLEY_SCRIPT_H

#include <stdbool.h>
#include <stddef.h>

struct config;
struct proto_response;
struct request;
struct result;
struct worker;

struct script;

/* The main state: loads and runs the script (a load or run error is fatal). */
struct script *script_main_new(const struct config *cfg);
/* A worker's state: the script runs again in it; wrk.thread is the worker. */
struct script *script_thread_new(const struct config *cfg, struct worker *w);
void script_free(struct script *s);

/* In the main state: wrk.setup(thread), which calls setup(thread). */
void script_setup(struct script *main, struct worker *w);
/* In a worker's state: wrk.init(args), which calls init(args), then builds
 * the static request (the thread's wrk.request()). Sets *r to it. */
void script_init(struct script *s, struct request *r);
/* With a request() hook: call it once, as wrk does before the run, and
 * parse what it returns (exiting with wrk's "<what> at <line>:<col>" when it
 * is malformed). Returns the number of requests in it: the pipeline depth
 * every request() batch is then read with. */
size_t script_verify(struct script *s);

/* Which per-request hooks the thread's script defines. */
bool script_has_request(const struct script *s);
bool script_has_delay(const struct script *s);
bool script_has_response(const struct script *s);
/* Whether response() declares the headers / body arguments. */
bool script_response_wants(const struct script *s, bool *head, bool *body);

/* request(): the returned bytes replace r->data/r->len (r->depth is kept). */
void script_request(struct script *s, struct request *r);
/* delay(): milliseconds to wait before the next request. */
double script_delay(struct script *s);
/* response(status, headers, body) for the response r just completed. */
void script_response(struct script *s, const struct proto_response *r);

/* After the report, in the main state: done(summary, latency, requests). */
void script_done(struct script *main, const struct result *r);
bool script_has_done(const struct script *main);

#endif
