-- auth.lua: log in once, then send the token with every request.
--
-- Each thread first asks /authenticate. The first successful answer carries
-- an X-Token header; from then on the thread requests /resource with that
-- token. Connections of a thread that were already waiting for /authenticate
-- finish that request normally.
--
--   volley -t2 -c20 -d30s -s scripts/auth.lua http://127.0.0.1:8080/
--
-- SPDX-License-Identifier: MIT

local token = nil
local path = "/authenticate"

-- request() runs before every request: it builds the bytes to send.
function request()
   return wrk.format("GET", path)
end

-- response() runs after every response. Declaring the headers parameter asks
-- volley for the header table (the body is not built, as it is not declared).
function response(status, headers)
   if token == nil and status == 200 then
      token = headers["X-Token"]
      path = "/resource"
      wrk.headers["X-Token"] = token   -- wrk.format() adds it from now on
   end
end
