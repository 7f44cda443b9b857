-- make bench: after the run, one line with the exact figures bench.py needs
-- (the text report rounds the mean latency to three digits). done() runs
-- after the run, so loading this script changes nothing on the hot path of
-- volley or wrk. Other bench scripts load it with dofile.
-- SPDX-License-Identifier: MIT

done = function(summary, latency, requests)
   local e = summary.errors
   io.write(string.format("bench: requests %d duration_us %d latency_mean_us %.3f " ..
                          "socket_errors %d status_errors %d\n",
                          summary.requests, summary.duration, latency.mean,
                          e.connect + e.read + e.write + e.timeout, e.status))
end
