-- An owner's kept records, newest first; ids whose record expired are dropped from the index.
-- KEYS: 1 the owner's ids. ARGV: 1 key prefix.
local records = {}
for _, id in ipairs(redis.call('ZREVRANGE', KEYS[1], 0, -1)) do
  local record = redis.call('GET', ARGV[1] .. 'task:' .. id)
  if record then
    records[#records + 1] = record
  else
    redis.call('ZREM', KEYS[1], id)
  end
end
return records
