-- make bench, row D: 16 requests pipelined in every batch, as wrk's
-- scripts/pipeline.lua does with 3. Runs unchanged in wrk.
-- SPDX-License-Identifier: MIT

dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "summary.lua")

init = function(args)
   local r = {}
   for i = 1, 16 do
      r[i] = wrk.format(nil, "/?" .. i)
   end
   req = table.concat(r)
end

request = function()
   return req
end
