/* volley's version line, naming the libraries it runs on.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_VERSION_H
#define VOLLEY_VERSION_H

/* "volley X.Y.Z [epoll] (LuaJIT 2.1.0-beta3, OpenSSL 3.0.11 19 Sep 2023, nghttp2 1.52.0)" */
const char *version_line(void);

#endif
