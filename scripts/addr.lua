-- addr.lua: give each thread its own server address.
--
-- setup() runs in the main Lua state once per thread, before the thread
-- starts. Here it resolves the URL's host once, keeps only the addresses that
-- accept a connection, and hands each thread one of them at random. Every
-- connection of a thread then goes to that thread's address (the Host header
-- still comes from the URL).
--
--   volley -t4 -c100 -d30s -s scripts/addr.lua http://example.test:8080/
--
-- SPDX-License-Identifier: MIT

local reachable

function setup(thread)
   if not reachable then
      reachable = {}
      for _, addr in ipairs(wrk.lookup(wrk.host, wrk.port or wrk.scheme)) do
         if wrk.connect(addr) then
            table.insert(reachable, addr)
         end
      end
   end
   thread.addr = reachable[math.random(#reachable)]
end

-- init() runs in the thread's own Lua state, where wrk.thread is the thread.
function init(args)
   print(string.format("thread addr: %s", tostring(wrk.thread.addr)))
end
