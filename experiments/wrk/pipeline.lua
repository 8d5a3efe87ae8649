-- wrk script: HTTP/1.1 pipelining. Each write carries DEPTH requests
-- (`wrk -s pipeline.lua URL -- DEPTH`, default 16), so the client spends one
-- send and one receive per DEPTH requests: cheap enough per request that a
-- server stage, not the client, can saturate. wrk counts every response.
local depth = 16
local batch

init = function(args)
   depth = tonumber(args[1]) or depth
   local r = {}
   for i = 1, depth do
      r[i] = wrk.format(nil, nil)
   end
   batch = table.concat(r)
end

request = function()
   return batch
end
