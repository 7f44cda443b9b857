-- make bench, row B2: every request different, built the way scripts in the
-- wild build them: a header set to a number, then wrk.format with a path
-- that never repeats; and a response() that looks at the status. Runs
-- unchanged in wrk.
-- SPDX-License-Identifier: MIT

dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "summary.lua")

local n = 0
local bad = 0

request = function()
   n = n + 1
   wrk.headers["X-N"] = n
   return wrk.format(nil, "/item/" .. n)
end

response = function(status)
   if status ~= 200 then
      bad = bad + 1
   end
end
