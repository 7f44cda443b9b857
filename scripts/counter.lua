-- counter.lua: a different path and header on every request.
--
-- Every thread has a Lua state of its own, so each thread counts on its own:
-- with two threads, two requests go to /5. (The first thread's request() is
-- also called once before the run, to check what it returns, so that
-- thread's first request on the wire is /1.)
--
--   volley -t2 -c10 -d10s -s scripts/counter.lua http://127.0.0.1:8080/
--
-- SPDX-License-Identifier: MIT

local counter = 0

function request()
   local path = "/" .. counter
   wrk.headers["X-Counter"] = counter
   counter = counter + 1
   return wrk.format(nil, path)
end
