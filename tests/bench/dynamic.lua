-- make bench, row B: a request() that changes the path and a header of every
-- request, and a response() that looks at the status. Runs unchanged in wrk.
-- SPDX-License-Identifier: MIT

dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "summary.lua")

local n = 0
local bad = 0

request = function()
   n = n + 1
   wrk.headers["X-Request"] = tostring(n)
   return wrk.format(nil, "/item/" .. (n % 1000))
end

response = function(status)
   if status ~= 200 then
      bad = bad + 1
   end
end
