-- wrk script: browser-like request heads with a Cookie header of a given
-- size, optionally pipelined. `wrk -s heads.lua URL -- COOKIE_BYTES [DEPTH]`:
-- the headers of browser.lua, then a Cookie of COOKIE_BYTES bytes made of
-- name=value pairs as a site's analytics and session cookies look (none at
-- 0), and DEPTH requests per write (default 1: one request in flight per
-- connection). A large head costs the server's loop a larger recv and a
-- longer parse while the app's work stays the same.
local depth = 1
local batch

local function cookie(n)
   local parts, len, i = {}, 0, 0
   while len < n do
      i = i + 1
      local p = string.format("_c%03d=%s", i, string.rep(string.char(97 + i % 26), 40))
      parts[#parts + 1] = p
      len = len + #p + 2
   end
   return string.sub(table.concat(parts, "; "), 1, n)
end

init = function(args)
   local bytes = tonumber(args[1]) or 0
   depth = tonumber(args[2]) or depth
   wrk.headers["User-Agent"] = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"
   wrk.headers["Accept"] = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"
   wrk.headers["Accept-Language"] = "en-GB,en-US;q=0.9,en;q=0.8"
   wrk.headers["Accept-Encoding"] = "gzip, deflate, br"
   wrk.headers["Cache-Control"] = "max-age=0"
   wrk.headers["Sec-Fetch-Dest"] = "document"
   wrk.headers["Sec-Fetch-Mode"] = "navigate"
   wrk.headers["Sec-Fetch-Site"] = "none"
   wrk.headers["Upgrade-Insecure-Requests"] = "1"
   if bytes > 0 then
      wrk.headers["Cookie"] = cookie(bytes)
   end
   local r = {}
   for i = 1, depth do
      r[i] = wrk.format(nil, nil)
   end
   batch = table.concat(r)
end

request = function()
   return batch
end
