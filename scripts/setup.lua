-- setup.lua: passing values to the threads and reading them back.
--
-- thread:set(name, value) copies a value into a global of the thread's Lua
-- state, thread:get(name) copies one back. Numbers, strings, booleans, nil
-- and tables of those (nested too) can be copied; functions cannot.
--
--   volley -t2 -c10 -d10s -s scripts/setup.lua http://127.0.0.1:8080/
--
-- SPDX-License-Identifier: MIT

local threads = {}

-- Main state, once per thread before it starts.
function setup(thread)
   table.insert(threads, thread)
   thread:set("id", #threads)
end

-- Thread state: the globals below are read back by done().
function init(args)
   requests = 0
   responses = 0
   print(string.format("thread %d created", id))
end

function request()
   requests = requests + 1
   return wrk.request()   -- the request volley would send without a script
end

function response(status)
   responses = responses + 1
end

-- Main state, after the report: the threads have ended.
function done(summary, latency, requests)
   for _, thread in ipairs(threads) do
      print(string.format("thread %d made %d requests and got %d responses",
                          thread:get("id"), thread:get("requests"),
                          thread:get("responses")))
   end
end
