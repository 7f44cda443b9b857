-- post.lua: POST a form.
--
-- Changes made to wrk.method, wrk.body and wrk.headers at the top level (or in
-- init()) shape the request every connection sends. Content-Length is added
-- from the body; nothing else is added besides Host.
--
--   volley -t2 -c10 -d10s -s scripts/post.lua http://127.0.0.1:8080/form
--
-- SPDX-License-Identifier: MIT

wrk.method = "POST"
wrk.body = "name=volley&kind=benchmark"
wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
