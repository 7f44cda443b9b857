-- report.lua: latency percentiles as CSV after the report.
--
-- done() runs once in the main Lua state after the text report. latency
-- holds every request's latency in microseconds; requests holds the Req/Sec
-- samples (per thread, every 100 ms).
--
--   volley -t2 -c10 -d10s -s scripts/report.lua http://127.0.0.1:8080/
--
-- SPDX-License-Identifier: MIT

function done(summary, latency, requests)
   io.write("------------------------------\n")
   for _, p in ipairs({ 50, 90, 99, 99.999 }) do
      io.write(string.format("%g%%,%d\n", p, latency:percentile(p)))
   end
end
