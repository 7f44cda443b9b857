-- The Lua side of volley's scripting API: the `wrk` module every script
-- sees as the global `wrk` (and through require "wrk"). volley embeds this
-- file in its binary; wrk.format, wrk.lookup and wrk.connect are C functions
-- it adds to the table, and it fills in scheme, host, port, path and headers
-- from the command line before the user's script runs.
-- SPDX-License-Identifier: MIT

-- The script's hooks are its global functions, looked up without
-- metamethods, so that a strict-mode _G (an __index that raises for
-- undeclared names) does not turn a missing hook into an error.
local rawget, G = rawget, _G

local wrk = {
   scheme  = "http",
   host    = "localhost",
   port    = nil,
   method  = "GET",
   path    = "/",
   headers = {},
   body    = nil,
   thread  = nil,
}

-- Called by volley in the main state for each thread before it starts.
function wrk.setup(thread)
   local setup = rawget(G, "setup")
   if type(setup) == "function" then
      setup(thread)
   end
end

local function has_header(headers, name)
   name = name:lower()
   for key in pairs(headers) do
      if type(key) == "string" and key:lower() == name then
         return true
      end
   end
   return false
end

-- Called by volley in each thread's state: the default Host header, then
-- the script's init(), then the request every connection of this thread
-- sends when the script has no request() of its own. Changes a script makes
-- to wrk.method, path, headers or body after this are not seen by it.
function wrk.init(args)
   if not has_header(wrk.headers, "Host") then
      local host = wrk.host
      if host:find(":", 1, true) then
         -- an IPv6 literal; its zone (fe80::1%eth0) is this machine's business
         host = "[" .. host:gsub("%%.*", "") .. "]"
      end
      if wrk.port then
         host = host .. ":" .. wrk.port
      end
      wrk.headers["Host"] = host
   end

   local init = rawget(G, "init")
   if type(init) == "function" then
      init(args)
   end

   local req = wrk.format()
   wrk.request = function()
      return req
   end
   return req
end

-- Built against PUC Lua 5.1 instead of LuaJIT: its string.format("%s")
-- ignores __tostring, and wrk's scripts format addresses that way
-- (addr.lua: ("thread addr: %s"):format(wrk.thread.addr)).
if not jit then
   local format, unpack, select = string.format, unpack, select
   string.format = function(fmt, ...)
      local args, n = {...}, select("#", ...)
      for i = 1, n do
         if type(args[i]) == "userdata" then
            args[i] = tostring(args[i])
         end
      end
      return format(fmt, unpack(args, 1, n))
   end
end

return wrk
