-- pipeline.lua: HTTP/1.1 pipelining.
--
-- request() returns several requests at once; volley writes them together and
-- waits for all their responses before the next batch. How many requests a
-- batch holds is counted once, from the first request() call before the run,
-- and applies to every batch. Each response counts as one request in the
-- report; the latency of a batch runs from its first byte written to its last
-- response.
--
-- The depth is the first script argument (default 3):
--
--   volley -t2 -c10 -d10s -s scripts/pipeline.lua http://127.0.0.1:8080/ 16
--
-- SPDX-License-Identifier: MIT

local batch

function init(args)
   local depth = tonumber(args[1]) or 3
   local requests = {}
   for i = 1, depth do
      requests[i] = wrk.format(nil, "/?n=" .. i)
   end
   -- Built once: request() then costs nothing per batch.
   batch = table.concat(requests)
end

function request()
   return batch
end
