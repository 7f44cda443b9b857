/* HTTP/2 before a run starts: the checks of its operations table.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_H2_START_H
#define VOLLEY_H2_START_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct route;
struct request;

/* Whether the batch r can go as HEADERS (and DATA) frames over an http or
 * https (tls) connection: false with a one-line reason in err. */
bool h2_check_request(const struct request *r, bool tls, char *err, size_t errlen);
/* Over cleartext (prior knowledge): false when the target answers the
 * connection preface as an HTTP/1.1 server would, with why it does not
 * speak HTTP/2 in why. Anything else is left to the run. */
bool h2_probe(const struct route *route, uint64_t deadline, char *why, size_t len);

#endif
