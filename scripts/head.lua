-- head.lua: HEAD requests.
--
-- A response to HEAD has headers only, even when they announce a body
-- (Content-Length or chunked); volley knows that and reads on.
--
--   volley -t2 -c10 -d10s -s scripts/head.lua http://127.0.0.1:8080/file
--
-- SPDX-License-Identifier: MIT

wrk.method = "HEAD"
