-- delay.lua: think time between requests.
--
-- delay() runs before each request on every connection and returns how many
-- milliseconds to wait before sending it: here a random 10 to 50 ms. The
-- pause is not part of the measured latency.
--
--   volley -t2 -c50 -d30s -s scripts/delay.lua http://127.0.0.1:8080/
--
-- SPDX-License-Identifier: MIT

function delay()
   return math.random(10, 50)
end
