-- stop.lua: end a thread's run from the script.
--
-- After 100 responses the thread calls wrk.thread:stop(). When every thread
-- has stopped, the run ends and the report covers the time it really took.
--
--   volley -t2 -c10 -d60s -s scripts/stop.lua http://127.0.0.1:8080/
--
-- SPDX-License-Identifier: MIT

local responses = 0

function response(status)
   responses = responses + 1
   if responses == 100 then
      wrk.thread:stop()
   end
end
